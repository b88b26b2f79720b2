"""The dashboard (docs/dashboard.md) in a real browser: Debian's headless Chromium driven through
Selenium's WebDriver (chromedriver), through a send-and-watch flow. A device CLI in the background
gets a notification with an image from a raw CCS app server; the page shows the message live in the
journal (Server-Sent Events), its timeline, the tray preview as Android shows it with the image
loaded; tapping it in the page takes it out of the tray; the clock control moves the virtual clock;
the drain button drains the app server's connection. Screenshots go to $CCS_ARTIFACTS_DIR
(default .build/test-artifacts/dashboard/)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from ccs_support import new_key, new_sender_id, register_device
from ccs_support.images import ImageServer
from ccs_support.semantics import VIRTUAL, app_server, data_msg, go, send_ack, start_device

ARTIFACTS = Path(os.environ.get("CCS_ARTIFACTS_DIR", Path(__file__).resolve().parents[2] / ".build" / "test-artifacts")) / "dashboard"
WAIT = 20


def chromium_paths() -> tuple[str, str]:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not browser or not driver:
        pytest.fail("the dashboard test needs Debian's chromium and chromium-driver (scripts/setup installs them)")
    return browser, driver


@pytest.fixture
def browser():
    binary, driver_path = chromium_paths()
    os.environ.setdefault("SE_AVOID_STATS", "true")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1600,1000",
                "--no-first-run", "--disable-gpu"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    driver.implicitly_wait(0)
    yield driver
    driver.quit()


@pytest.fixture
def images():
    server = ImageServer()
    yield server
    server.close()


def shot(driver, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(ARTIFACTS / f"{name}.png"))


def until(driver, what: str, predicate):
    """Waits for a fact on the page. The page re-renders lists when they change, so an element found
    in one poll may be gone in the next: such a poll counts as "not yet"."""
    try:
        return WebDriverWait(driver, WAIT, poll_frequency=0.1,
                             ignored_exceptions=(StaleElementReferenceException,)).until(lambda d: predicate(d))
    except Exception:
        shot(driver, "failed-" + what.replace(" ", "-"))
        raise AssertionError(f"the page never showed: {what}") from None


def fits_a_laptop_screen(driver) -> None:
    """At 1280×800 (a laptop's screen; the device table used to scroll sideways even at 1400 px) the
    page and each panel show every column without a horizontal scroll bar. Leaves the page at that
    size, and its screenshot in dashboard-1280x800.png."""
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": False})
    # Read in one script, after the layout at the new size (scrollWidth forces it).
    sizes = until(driver, "the layout at 1280x800", lambda d: d.execute_script("""
        const doc = document.documentElement;
        if (doc.clientWidth !== 1280) return null;
        const table = document.querySelector('#devices'), panel = document.querySelector('#devices-panel');
        return {page: [doc.scrollWidth, doc.clientWidth],
                panels: [...document.querySelectorAll('main > section')]
                    .filter((s) => s.scrollWidth > s.clientWidth).map((s) => [s.id, s.scrollWidth, s.clientWidth]),
                table: [table.getBoundingClientRect().right, panel.getBoundingClientRect().right],
                columns: [...table.querySelectorAll('thead th')].map((th) => th.textContent)};"""))
    shot(driver, "dashboard-1280x800")
    assert sizes["page"][0] <= sizes["page"][1], sizes
    assert not sizes["panels"], f"panels that scroll sideways at 1280x800: {sizes['panels']}"
    assert sizes["table"][0] <= sizes["table"][1], sizes
    # Every fact the table had is still a column (two facts in some cells).
    assert sizes["columns"] == ["token", "appplatform", "status", "onlinestate", "queued"], sizes


def test_send_and_watch_in_a_real_browser(start_server, xmpp, devices, browser, images):
    srv = start_server(extra_args=VIRTUAL)
    sender, key = new_sender_id(), new_key()
    c = app_server(srv, sender, key)
    dev, token = start_device(devices, srv, "com.example.pizza", [sender])
    go(dev, "background")

    browser.get(srv.http_base + "/")
    assert browser.title == "ccs-emulator"
    row = until(browser, "the device row", lambda d: d.find_elements(By.CSS_SELECTOR, f'#devices tr[data-token="{token}"]'))[0]
    assert "online" in row.find_element(By.CSS_SELECTOR, ".online").text
    until(browser, "the live stream", lambda d: d.find_element(By.ID, "stream-state").text == "(live)")
    until(browser, "the app server's connection", lambda d: d.find_elements(By.CSS_SELECTOR, "#connections tbody tr"))

    image = images.base + "/png/320x120.png"
    send_ack(c, data_msg(token, "pizza", notification={"title": "Sparky says hello!", "body": "Pizza is ready", "image": image}))
    shown = dev.expect(lambda e: e.get("event") == "notification", timeout=WAIT)
    assert shown["message"]["notification"]["image"] == image

    item = until(browser, "the message in the journal",
                 lambda d: [li for li in d.find_elements(By.CSS_SELECTOR, "#journal li") if "pizza" in li.text])[0]
    item.click()
    until(browser, "the message's timeline with the tray",
          lambda d: {"accepted", "handed_over", "device_acked", "shown_in_tray"}
          <= {e.get_attribute("data-kind") for e in d.find_elements(By.CSS_SELECTOR, "#timeline li.event")})

    row = browser.find_element(By.CSS_SELECTOR, f'#devices tr[data-token="{token}"]')
    row.click()
    # Read in one script: the page re-renders the tray when it changes, which would leave a held
    # element stale between two WebDriver calls.
    preview = until(browser, "the tray preview with its image loaded", lambda d: d.execute_script("""
        const card = document.querySelector('#tray .preview');
        const img = card && card.querySelector('img');
        if (!img || !img.complete || img.naturalWidth === 0) return null;
        return {platform: card.dataset.platform, title: card.querySelector('.title').textContent,
                body: card.querySelector('.body').textContent, src: img.src, width: img.naturalWidth};"""))
    assert preview == {"platform": "android", "title": "Sparky says hello!", "body": "Pizza is ready", "src": image,
                       "width": 320}, preview
    shot(browser, "dashboard")
    # An iOS device with a long app id beside it: the table wraps the id rather than growing wider.
    other = register_device(srv.http_base, "com.example.enterprise.notifications.staging", [sender], platform="ios")["token"]
    until(browser, "the second device's row", lambda d: d.find_elements(By.CSS_SELECTOR, f'#devices tr[data-token="{other}"]'))
    fits_a_laptop_screen(browser)

    browser.find_element(By.CSS_SELECTOR, "#tray .preview button.tap").click()
    # A tap in the page is the admin API's tap (docs/admin-api.md): the entry leaves the tray and the
    # journal records it.
    until(browser, "tapped in the timeline",
          lambda d: "tapped" in {e.get_attribute("data-kind") for e in d.find_elements(By.CSS_SELECTOR, "#timeline li.event")})
    until(browser, "the tray emptied", lambda d: not d.find_elements(By.CSS_SELECTOR, "#tray .preview"))

    before = int(browser.find_element(By.ID, "clock-now").get_attribute("data-ms"))
    field = browser.find_element(By.ID, "advance-seconds")
    field.clear()
    field.send_keys("3600")
    browser.find_element(By.ID, "advance-clock").click()
    until(browser, "the clock an hour later",
          lambda d: int(d.find_element(By.ID, "clock-now").get_attribute("data-ms")) == before + 3_600_000)

    browser.find_element(By.CSS_SELECTOR, "#connections button.drain").click()
    control, _ = c.wait_gcm(timeout=WAIT)
    assert control.get("control_type") == "CONNECTION_DRAINING", control
    until(browser, "the connection draining", lambda d: d.execute_script(
        "return [...document.querySelectorAll('#connections tbody tr')].some(r => r.textContent.includes('draining'));"))
    shot(browser, "after-tap-advance-drain")
    assert not [e for e in browser.get_log("browser") if e.get("level") == "SEVERE"], browser.get_log("browser")
