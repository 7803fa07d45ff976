# Sourced by scripts/test.sh: the five coding-agent CLIs the presets drive (tests/agents/), installed from
# npm and PyPI at pinned versions into a cache outside the clone, like the control plane's binaries.
#
# Each CLI gets a directory of its own named after its version (an npm --prefix, or a venv for aider), so
# bumping one pin reinstalls that one only; $CRUCIBLE_AGENTS_BIN holds a symlink per CLI to the pinned
# install. When a CLI cannot be installed its tests are skipped (failed under CI or
# CRUCIBLE_AGENTS_REQUIRED=1), and this says so up front.
#
# Usable on its own too: `bash scripts/testenv/agents.sh` installs and prints where.

CLAUDE_CODE_VERSION="2.1.332"  # @anthropic-ai/claude-code
CODEX_VERSION="0.171.0"        # @openai/codex
GEMINI_CLI_VERSION="0.61.0"    # @google/gemini-cli
QWEN_CODE_VERSION="0.15.10"    # @qwen-code/qwen-code (0.16 and later need Node 22; Debian's is 20)
AIDER_VERSION="0.86.2"         # aider-chat (PyPI), in a venv of its own

_agents_npm() {  # NAME PACKAGE VERSION BIN: npm --prefix install, then link BIN
  local name="$1" package="$2" version="$3" bin="$4"
  local prefix="$CRUCIBLE_AGENTS_CACHE/$name-$version"
  if [ ! -x "$prefix/node_modules/.bin/$bin" ]; then
    if ! command -v npm >/dev/null 2>&1; then
      echo "   $name: npm is missing, not installed"
      return 0
    fi
    rm -rf "$prefix.partial"
    mkdir -p "$prefix.partial"
    if npm install --prefix "$prefix.partial" --no-audit --no-fund --loglevel=error --foreground-scripts \
      "$package@$version" >"$CRUCIBLE_AGENTS_CACHE/$name-$version.log" 2>&1; then
      rm -rf "$prefix" && mv "$prefix.partial" "$prefix"
    else
      echo "   $name: npm install $package@$version failed (see $CRUCIBLE_AGENTS_CACHE/$name-$version.log)"
      return 0
    fi
  fi
  ln -sfn "$prefix/node_modules/.bin/$bin" "$CRUCIBLE_AGENTS_BIN/$bin"
  echo "   $bin: $package@$version"
}

_agents_aider() {
  local venv="$CRUCIBLE_AGENTS_CACHE/aider-$AIDER_VERSION"
  if [ ! -x "$venv/bin/aider" ]; then
    local python
    python="$(_agents_aider_python)"
    if [ -z "$python" ]; then
      echo "   aider: no Python 3.10-3.12 found, not installed"
      return 0
    fi
    rm -rf "$venv.partial"
    if "$python" -m venv "$venv.partial" >/dev/null 2>&1 \
      && "$venv.partial/bin/python" -m pip install -q --disable-pip-version-check "aider-chat==$AIDER_VERSION" \
        >"$CRUCIBLE_AGENTS_CACHE/aider-$AIDER_VERSION.log" 2>&1; then
      rm -rf "$venv" && mv "$venv.partial" "$venv"
      # A venv records its own path: rebuild the scripts' #! lines for the final directory.
      sed -i "1s|$venv.partial|$venv|" "$venv"/bin/* 2>/dev/null || true
      sed -i "s|$venv.partial|$venv|" "$venv/pyvenv.cfg" "$venv/bin/activate" 2>/dev/null || true
    else
      echo "   aider: pip install aider-chat==$AIDER_VERSION failed (see $CRUCIBLE_AGENTS_CACHE/aider-$AIDER_VERSION.log)"
      return 0
    fi
  fi
  ln -sfn "$venv/bin/aider" "$CRUCIBLE_AGENTS_BIN/aider"
  echo "   aider: aider-chat==$AIDER_VERSION"
}

_agents_aider_python() {  # aider-chat supports Python 3.10 to 3.12
  local candidate
  for candidate in python3.12 python3.11 python3.10 python3; do
    if command -v "$candidate" >/dev/null 2>&1 \
      && "$candidate" -c 'import sys, venv; sys.exit(not (3, 10) <= sys.version_info[:2] <= (3, 12))' 2>/dev/null; then
      command -v "$candidate"
      return 0
    fi
  done
}

ensure_agents() {
  export CRUCIBLE_AGENTS_CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/crucible-agents"
  export CRUCIBLE_AGENTS_BIN="$CRUCIBLE_AGENTS_CACHE/bin"
  mkdir -p "$CRUCIBLE_AGENTS_BIN"
  (
    flock 9
    _agents_npm claude-code @anthropic-ai/claude-code "$CLAUDE_CODE_VERSION" claude
    _agents_npm codex @openai/codex "$CODEX_VERSION" codex
    _agents_npm gemini-cli @google/gemini-cli "$GEMINI_CLI_VERSION" gemini
    _agents_npm qwen-code @qwen-code/qwen-code "$QWEN_CODE_VERSION" qwen
    _agents_aider
  ) 9>"$CRUCIBLE_AGENTS_CACHE/.lock"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  ensure_agents
  echo "CRUCIBLE_AGENTS_BIN=$CRUCIBLE_AGENTS_BIN"
fi
