# Sourced by scripts/test.sh: Chromium and axe-core for the dashboard's browser tests
# (tests/api/test_dashboard_browser.py).
#
# Chromium is Debian's package (installed when missing and we are root on Debian); axe-core comes from npm
# into a cache outside the clone, pinned to one major version, and CRUCIBLE_AXE points at its axe.min.js.
# When either is missing the tests are skipped (failed under CI or CRUCIBLE_BROWSER_REQUIRED=1), and this
# says so up front.

AXE_VERSION="4"

ensure_browser() {
  if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "   installing Debian's chromium package"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  fi
  if command -v chromium >/dev/null 2>&1; then
    echo "   $(chromium --version 2>/dev/null | head -1)"
  else
    echo "   chromium is not installed: the browser tests will be SKIPPED (install the chromium package)"
  fi
  local cache="${XDG_CACHE_HOME:-$HOME/.cache}/crucible/axe-core-$AXE_VERSION"
  local axe="$cache/node_modules/axe-core/axe.min.js"
  if [ ! -f "$axe" ] && command -v npm >/dev/null 2>&1; then
    mkdir -p "$cache"
    npm install --prefix "$cache" --silent --no-audit --no-fund "axe-core@$AXE_VERSION" >/dev/null 2>&1 || true
  fi
  if [ -f "$axe" ]; then
    export CRUCIBLE_AXE="$axe"
    echo "   axe-core at $axe"
  else
    echo "   axe-core is not installed (needs npm): the accessibility test will be SKIPPED"
  fi
}
