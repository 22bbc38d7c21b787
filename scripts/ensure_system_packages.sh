#!/usr/bin/env bash
# Debian packages the tests use: chromium for the browser tests (never a downloaded browser) and
# docker-compose (v1) to validate docker-compose.yml, and npm to install axe-core (tests/browser/package.json). Installs what is missing when it can; if it
# cannot, the tests that need a package skip with a message that says so.
set -uo pipefail
missing=()
have_chromium=""
for candidate in "${CHROMIUM:-}" /usr/bin/chromium /usr/bin/chromium-browser; do
  [ -n "$candidate" ] && [ -x "$candidate" ] && have_chromium=1
done
[ -z "$have_chromium" ] && missing+=(chromium)
if ! command -v docker-compose >/dev/null 2>&1 && ! docker compose version >/dev/null 2>&1; then
  missing+=(docker-compose)
fi
command -v npm >/dev/null 2>&1 || missing+=(npm)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing Debian's ${missing[*]} for the tests…"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive timeout 900 apt-get install -y -qq "${missing[@]}") \
    >/tmp/breaker-panel-apt.log 2>&1 \
    || echo "warning: could not install ${missing[*]} (see /tmp/breaker-panel-apt.log); the tests that need them will skip" >&2
else
  echo "warning: ${missing[*]} missing and no root apt-get; the tests that need them will skip (apt-get install ${missing[*]})" >&2
fi
exit 0
