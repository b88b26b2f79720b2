// The dashboard: live views over the admin API (docs/admin-api.md). No framework and no build step:
// every text from app servers and devices goes into the page as text, never as HTML.
"use strict";

const api = "/emulator/v1";
const $ = (sel, root = document) => root.querySelector(sel);
const state = { selectedToken: null, selectedMessage: null, messages: new Map() };

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else if (k.startsWith("data-")) e.setAttribute(k, v);
    else if (k === "onclick") e.addEventListener("click", v);
    else e[k] = v;
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c instanceof Node ? c : String(c));
  return e;
}

async function call(method, path, body) {
  const init = { method, headers: {} };
  if (body !== undefined) { init.body = JSON.stringify(body); init.headers["Content-Type"] = "application/json"; }
  const r = await fetch(api + path, init);
  const text = await r.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch (_) { /* not JSON */ }
  if (!r.ok) throw new Error((json && json.error && json.error.message) || `${r.status} ${text}`);
  return json;
}

// Message ids hold `%` and go percent-encoded; registration tokens ([A-Za-z0-9:_-]) go as they are,
// as every client writes them.
const enc = (s) => encodeURIComponent(s);
// An app id as text with a line-break opportunity after each dot, so that a long one wraps there.
const atDots = (s) => String(s).split(/(?<=\.)/).flatMap((part, i) => (i ? [el("wbr"), part] : [part]));
const short = (t) => (t && t.length > 18 ? t.slice(0, 8) + "…" + t.slice(-6) : t);
// Replaces a list's children only when what it shows changed: a refresh that finds nothing new
// leaves the page (and a pointer on a button) alone.
const shown = new Map();
function render(container, data, build) {
  const key = JSON.stringify(data);
  if (shown.get(container) === key) return;
  shown.set(container, key);
  $(container).replaceChildren(...build());
}

const time = (ms) => new Date(ms).toISOString().replace("T", " ").replace("Z", "");

// ---- header: ports, clock, reset -------------------------------------------------------------

async function refreshHeader() {
  const [info, clock] = await Promise.all([call("GET", "/info"), call("GET", "/clock")]);
  $("#ports").textContent = `CCS ${info.ccs_port} · devices ${info.device_port} · HTTP ${info.http_port}`;
  $("#clock-kind").textContent = clock.kind;
  $("#clock-now").textContent = time(clock.now_ms);
  $("#clock-now").dataset.ms = clock.now_ms;
  $("#advance-form").hidden = clock.kind !== "virtual";
}

$("#advance-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  await call("POST", "/clock/advance", { seconds: Number($("#advance-seconds").value) });
  await refreshAll();
});

$("#reset").addEventListener("click", async () => {
  if (!confirm("Forget every device, queue, tray, device group and the journal?")) return;
  await call("POST", "/reset");
  state.selectedToken = null; state.selectedMessage = null; state.messages.clear();
  $("#journal").replaceChildren();
  await refreshAll();
});

// ---- devices --------------------------------------------------------------------------------

async function refreshDevices() {
  const { devices } = await call("GET", "/devices");
  $("#device-count").textContent = `(${devices.length})`;
  render("#devices tbody", [devices, state.selectedToken], () => devices.map((d) => {
    const st = d.state || {};
    const tr = el("tr", { "data-token": d.token, onclick: () => selectDevice(d.token) },
      el("td", {}, el("code", { title: d.token }, short(d.token))),
      // Two facts a cell, the second in small type under the first: seven columns fit a laptop's
      // screen (1280 px) without a horizontal scroll bar.
      el("td", { class: "app" }, ...atDots(d.app), el("div", { class: "sub platform" }, d.platform)),
      el("td", {}, d.status),
      el("td", {}, el("span", { class: "online" }, d.online ? "online" : "offline"),
        el("div", { class: "sub state" }, `${st.foreground ? "foreground" : "background"}${st.idle ? ", idle" : ""}`)),
      el("td", { class: "queued" }, d.queued));
    if (d.token === state.selectedToken) tr.classList.add("selected");
    return tr;
  }));
  if (state.selectedToken) await refreshDeviceDetail();
}

async function selectDevice(token) {
  state.selectedToken = token;
  for (const tr of document.querySelectorAll("#devices tbody tr")) tr.classList.toggle("selected", tr.dataset.token === token);
  await refreshDeviceDetail();
}

// What the platform shows for a tray entry (its rendered `view`, docs/platforms.md).
function preview(entry, device) {
  const v = entry.view || { platform: device.platform, notification: entry.message.notification || {} };
  let title = "", body = "";
  if (v.platform === "ios") {
    const alert = ((v.payload || {}).aps || {}).alert;
    if (typeof alert === "string") body = alert; else if (alert) { title = alert.title || ""; body = alert.body || ""; }
  } else {
    const n = v.notification || {};
    title = n.title || ""; body = n.body || "";
  }
  const card = el("div", { class: "preview", "data-platform": v.platform || device.platform, "data-message-id": entry.message_id },
    el("span", { class: "app" }, `${device.app} · ${v.platform || device.platform}`),
    el("span", { class: "title" }, title), el("span", { class: "body" }, body));
  const image = v.image;
  if (typeof image === "string" && /^(https?:|data:image\/)/.test(image)) card.append(el("img", { src: image, alt: "notification image" }));
  card.append(el("button", { class: "tap", onclick: () => tap(device.token, entry.message_id) }, "tap"));
  return card;
}

async function refreshDeviceDetail() {
  const token = state.selectedToken;
  let d, tray;
  try {
    [d, tray] = await Promise.all([call("GET", `/devices/${token}`), call("GET", `/devices/${token}/tray`)]);
  } catch (_) { $("#device-detail").hidden = true; state.selectedToken = null; return; }
  $("#device-detail").hidden = false;
  $("#detail-token").textContent = token;
  const topics = Object.keys(d.topics || {});
  $("#detail-facts").textContent = `${d.app} · ${d.platform} · ${d.status} · ${d.online ? "online" : "offline"} · senders ${d.senders.join(", ")}`
    + (topics.length ? ` · topics ${topics.join(", ")}` : "");
  render("#tray", [token, tray.tray], () => tray.tray.map((e) => preview(e, d)));
  render("#queue", [token, d.queue], () => (d.queue || []).map((q) => el("li", {}, el("code", {}, q.app_message_id), " ",
    q.collapse_key ? `collapse ${q.collapse_key} · ` : "", `${q.kind} · ttl ${q.time_to_live} s · expires ${time(q.expires_at)}`)));
  render("#groups", [token, d.groups], () => (d.groups || []).map((g) => el("li", {}, `${g.notification_key_name} (sender ${g.sender_id})`)));
}

for (const b of document.querySelectorAll("#device-detail [data-state]")) {
  b.addEventListener("click", async () => {
    await call("POST", `/devices/${state.selectedToken}/state`, { [b.dataset.state]: true });
    await refreshDevices();
  });
}
$("#disconnect").addEventListener("click", async () => {
  await call("POST", `/devices/${state.selectedToken}/disconnect`);
  await refreshDevices();
});

async function tap(token, id) {
  await call("POST", `/devices/${token}/tray/${enc(id)}/tap`);
  await refreshDevices();
}

$("#register-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const d = await call("POST", "/devices", { app: $("#register-app").value, senders: [$("#register-sender").value],
                                              platform: $("#register-platform").value });
  await refreshDevices();
  await selectDevice(d.token);
});

// ---- app-server connections and the audit ---------------------------------------------------

async function refreshConnections() {
  const [{ connections }, audit] = await Promise.all([call("GET", "/connections"), call("GET", "/audit")]);
  // As in the device table, two facts a cell, so that the narrow middle panel needs no scroll bar.
  render("#connections tbody", connections, () => connections.map((c) => el("tr", { "data-connection": c.id },
    el("td", {}, el("code", {}, c.id), el("div", { class: "sub" }, c.sender_id)),
    el("td", {}, c.pending, el("div", { class: "sub" }, c.unacked_outbound)),
    el("td", {}, c.draining ? "draining" : el("button", { class: "drain",
      onclick: async () => { await call("POST", `/connections/${enc(c.id)}/drain`); await refreshConnections(); } }, "drain")))));
  const findings = [];
  for (const s of audit.senders || []) for (const f of s.findings || []) findings.push(el("li", {}, `${s.sender}: ${f.rule} — ${f.text}`));
  render("#audit", audit.senders || [], () => (findings.length ? findings : [el("li", { class: "muted" }, "none")]));
}

// ---- the journal: live list, one message's timeline -----------------------------------------

function journalItem(m) {
  const li = el("li", { "data-message-id": m.message_id, onclick: () => selectMessage(m.message_id) },
    el("span", { class: `status ${m.status}` }, m.status), el("span", {}, m.api || ""),
    el("code", {}, m.client_message_id || short(m.message_id)),
    el("span", { class: "muted" }, m.topic || short((m.tokens || [])[0] || "")));
  if (m.message_id === state.selectedMessage) li.classList.add("selected");
  return li;
}

function showMessage(m) {
  state.messages.set(m.message_id, m);
  const old = $(`#journal li[data-message-id="${CSS.escape(m.message_id)}"]`);
  const li = journalItem(m);
  if (old) old.replaceWith(li); else $("#journal").prepend(li);
  while ($("#journal").children.length > 500) $("#journal").lastElementChild.remove();
}

async function loadMessages() {
  const { messages } = await call("GET", "/messages?limit=200");
  $("#journal").replaceChildren();
  for (const m of messages.reverse()) showMessage(m);
}

async function selectMessage(id) {
  state.selectedMessage = id;
  for (const li of document.querySelectorAll("#journal li")) li.classList.toggle("selected", li.dataset.messageId === id);
  const m = await call("GET", `/messages/${enc(id)}`);
  $("#message-detail").hidden = false;
  $("#message-id").textContent = m.message_id;
  $("#timeline").replaceChildren(...m.events.map((e) => el("li", { class: "event", "data-kind": e.kind },
    el("time", {}, time(e.at)), " ", el("span", { class: `status ${e.kind}` }, e.kind), " ",
    e.token ? el("code", { title: e.token }, short(e.token)) : "", e.api ? ` via ${e.api}` : "",
    e.connection ? ` · ${e.connection}` : "", e.detail ? ` — ${e.detail}` : "")));
}

function follow() {
  const source = new EventSource(api + "/events");
  source.onopen = () => { $("#stream-state").textContent = "(live)"; };
  source.onerror = () => { $("#stream-state").textContent = "(reconnecting…)"; };
  source.onmessage = null;
  const onEvent = (ev) => {
    const e = JSON.parse(ev.data);
    const m = state.messages.get(e.message_id) || { message_id: e.message_id, tokens: [], events: 0 };
    m.status = e.kind;
    m.api = m.api || e.api; m.topic = m.topic || e.topic; m.client_message_id = m.client_message_id || e.client_message_id;
    if (e.token && !(m.tokens || []).includes(e.token)) m.tokens = [...(m.tokens || []), e.token];
    showMessage(m);
    if (state.selectedMessage === e.message_id) selectMessage(e.message_id);
    scheduleRefresh();
  };
  for (const kind of ["accepted", "refused", "not_stored", "stored", "fanned_out", "throttled", "handed_over", "device_acked",
                      "shown_in_tray", "tapped", "receipt_sent", "receipt_acked", "expired", "collapsed", "discarded",
                      "fault_applied"]) source.addEventListener(kind, onEvent);
}

// ---- refreshing --------------------------------------------------------------------------

let refreshTimer = null;
function scheduleRefresh() {
  if (refreshTimer) return;
  refreshTimer = setTimeout(async () => { refreshTimer = null; await refreshAll(); }, 150);
}

async function refreshAll() {
  try {
    await Promise.all([refreshHeader(), refreshDevices(), refreshConnections()]);
    document.body.dataset.refreshed = String(Date.now());
  } catch (e) {
    console.error(e);
  }
}

(async () => {
  await refreshAll();
  try { await loadMessages(); follow(); } catch (e) { $("#stream-state").textContent = `(${e.message})`; }
  setInterval(refreshAll, 2000);
})();
