# Sourced by scripts/test.sh: Octokit (npm @octokit/rest), the JavaScript client a PR bot is written with,
# for tests/localforge/test_octokit.py, which drives a bot's whole flow through it against the local forge.
#
# Installed into a cache outside the clone, pinned; CRUCIBLE_OCTOKIT points at its directory (the test links
# its node_modules beside the bot script). Without npm the test skips (fails under CI), and this says so.
#
# Usable on its own too: `bash scripts/testenv/octokit.sh` installs and prints where.

OCTOKIT_VERSION="22.0.1"  # @octokit/rest (ESM only; Node 20 or later)

ensure_octokit() {
  local cache="${XDG_CACHE_HOME:-$HOME/.cache}/crucible/octokit-$OCTOKIT_VERSION"
  if [ ! -f "$cache/node_modules/@octokit/rest/package.json" ] && command -v npm >/dev/null 2>&1; then
    rm -rf "$cache.partial"
    mkdir -p "$cache.partial"
    if npm install --prefix "$cache.partial" --no-audit --no-fund --loglevel=error \
      "@octokit/rest@$OCTOKIT_VERSION" >"$cache.log" 2>&1; then
      rm -rf "$cache" && mv "$cache.partial" "$cache"
    else
      echo "   npm install @octokit/rest@$OCTOKIT_VERSION failed (see $cache.log)"
    fi
  fi
  if [ -f "$cache/node_modules/@octokit/rest/package.json" ]; then
    export CRUCIBLE_OCTOKIT="$cache"
    echo "   @octokit/rest@$OCTOKIT_VERSION at $cache"
  else
    echo "   Octokit is not installed (needs npm): the Octokit bot test will be SKIPPED"
  fi
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  ensure_octokit
  echo "CRUCIBLE_OCTOKIT=${CRUCIBLE_OCTOKIT:-}"
fi
