#!/usr/bin/env bash
# Creates ./.venv (once) and installs crucible into it with the extras given as $1 ("" or "dev").
# Sourced by demo.sh and test.sh so both README commands work on a fresh machine.
set -euo pipefail
extras="${1:-}"
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null 2>&1 || true
if [ -n "$extras" ]; then
  .venv/bin/python -m pip install -q --disable-pip-version-check -e ".[$extras]"
else
  .venv/bin/python -m pip install -q --disable-pip-version-check -e .
fi
