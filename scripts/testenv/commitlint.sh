# Sourced by scripts/test.sh: commitlint with its Conventional Commits rules, from npm, for the tests that
# check the commit messages `conventional = true` writes (tests/engine/test_conventions.py).
#
# Installed into a cache outside the clone, pinned to one major version; CRUCIBLE_COMMITLINT points at its
# directory (bin: node_modules/.bin/commitlint). Without npm the tests skip (fail under CI), and this says so.

COMMITLINT_VERSION="19"

ensure_commitlint() {
  local cache="${XDG_CACHE_HOME:-$HOME/.cache}/crucible/commitlint-$COMMITLINT_VERSION"
  local bin="$cache/node_modules/.bin/commitlint"
  if [ ! -x "$bin" ] && command -v npm >/dev/null 2>&1; then
    mkdir -p "$cache"
    npm install --prefix "$cache" --silent --no-audit --no-fund \
      "@commitlint/cli@$COMMITLINT_VERSION" "@commitlint/config-conventional@$COMMITLINT_VERSION" >/dev/null 2>&1 || true
  fi
  if [ -x "$bin" ]; then
    export CRUCIBLE_COMMITLINT="$cache"
    echo "   commitlint at $bin"
  else
    echo "   commitlint is not installed (needs npm): the conventional-commit checks will be SKIPPED"
  fi
}
