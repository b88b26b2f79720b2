# shellcheck shell=bash
# Sourced by scripts/serve, scripts/test and scripts/tsan (not a command of its own): the one-line
# progress every long build shows.
#
# quiet_build NAME LOG COMMAND...
#   Runs COMMAND (a swift build) with its ~1,000 "[n/m] Compiling …" lines shown as one line that
#   updates in place on a terminal ("3m12s [312/1080] Compiling …"), or as one line a minute when
#   the output is not a terminal ("NAME: building: 3m12s [312/1080] Compiling …"), so a long build
#   never looks stuck. The whole output goes to LOG; if the build fails, its last 80 lines other than
#   progress (the compiler's errors and what led to them) are shown. Then the warnings in this
#   package's own code, once each (dependencies' are not ours to fix), and "Build complete!".
#   Progress, warnings and the total go to file descriptor QUIET_BUILD_FD (default 2, stderr:
#   scripts/serve's stdout carries only the server's ready line); a failure goes to stderr.
#   Returns the build's exit status.
quiet_build() {  # NAME LOG COMMAND...
    local name="$1" build_log="$2"; shift 2
    local fd="${QUIET_BUILD_FD:-2}"
    local tty=0 cols=100 started=$SECONDS status
    if [ -t "$fd" ]; then
        tty=1
        cols="$(tput cols 2>/dev/null || echo 100)"
    fi
    mkdir -p "$(dirname "$build_log")"
    set +e
    "$@" 2>&1 | tee "$build_log" | {
        last=$(( SECONDS - 60 ))  # the first progress line at once
        while IFS= read -r line; do
            case "$line" in
                \[*/*\]*) ;;
                *) continue ;;
            esac
            elapsed=$(( SECONDS - started ))
            text="$(printf '%dm%02ds %s' $(( elapsed / 60 )) $(( elapsed % 60 )) "$line")"
            if [ "$tty" = 1 ]; then
                printf '\r\033[K%s' "${text:0:$(( cols - 1 ))}" >&"$fd"
            elif [ $(( SECONDS - last )) -ge 60 ]; then
                last=$SECONDS
                printf '%s: building: %s\n' "$name" "$text" >&"$fd"
            fi
        done
    }
    status=${PIPESTATUS[0]}
    set -e
    if [ "$tty" = 1 ]; then printf '\r\033[K' >&"$fd"; fi
    if [ "$status" -ne 0 ]; then
        printf '%s: the build failed (exit status %s). The end of %s, without the progress lines:\n' \
            "$name" "$status" "$build_log" >&2
        grep -v -E '^\[[0-9]+/[0-9]+\]' "$build_log" | tail -n 80 >&2
        return "$status"
    fi
    grep -E "^$PWD/(Sources|Tests)/.*warning:" "$build_log" | sort -u >&"$fd" || true
    grep -E '^Build complete' "$build_log" >&"$fd" || true
}
