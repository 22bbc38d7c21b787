#!/usr/bin/env bash
# Browser tests drive Debian's chromium (never a downloaded browser). Install it when we can;
# if we cannot, the browser tests skip with a message that says so.
set -uo pipefail
for candidate in "${CHROMIUM:-}" /usr/bin/chromium /usr/bin/chromium-browser; do
  [ -n "$candidate" ] && [ -x "$candidate" ] && exit 0
done
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing Debian's chromium for the browser tests…"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/tmp/breaker-panel-apt.log 2>&1 \
    || echo "warning: could not install chromium (see /tmp/breaker-panel-apt.log); browser tests will skip" >&2
else
  echo "warning: no chromium and no root apt-get; browser tests will skip (apt-get install chromium)" >&2
fi
exit 0
