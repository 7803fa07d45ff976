#!/usr/bin/env bash
# Creates ./.venv (once) and installs crucible into it with the extras given as $1 ("" or "dev").
# Sourced by demo.sh and test.sh so both README commands work on a fresh machine.
#
# The install goes through uv when it can: pip took ~50 s to install the dev extras into a fresh clone's
# venv (most of scripts/test.sh's setup, which counts against the suite's 10 minutes), uv takes 2-5 s
# from its cache, and compiling the bytecode after it (below) most of the rest. uv is installed into the venv itself (nothing global), and pip stays the fallback, so
# a machine where uv cannot be had still gets a working venv, only slower. The venv keeps its own pip
# either way, for the user.
set -euo pipefail
extras="${1:-}"
target="."
if [ -n "$extras" ]; then
  target=".[$extras]"
fi
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
pip_install() { .venv/bin/python -m pip install -q --disable-pip-version-check "$@"; }
if ! .venv/bin/python -m uv --version >/dev/null 2>&1; then
  pip_install "uv>=0.5" >/dev/null 2>&1 || true
fi
if .venv/bin/python -m uv --version >/dev/null 2>&1; then
  .venv/bin/python -m uv pip install -q --python .venv/bin/python -e "$target"
  # uv installs no bytecode (pip compiles at install). Where PYTHONDONTWRITEBYTECODE is set, as on
  # some CI machines, Python then never caches it either, and every process compiled what it imported:
  # ~1.3 s more CPU for each `crucible` the tests start. compileall skips what is already up to date.
  site="$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  .venv/bin/python -m compileall -q -j 0 "$site" >/dev/null 2>&1 || true
else
  echo "   uv is not available: installing with pip (slower)"
  pip_install -e "$target"
fi
