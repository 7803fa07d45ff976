#!/usr/bin/env bash
# README's main job: install crucible into ./.venv and run the offline demo on embedded defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/venv.sh
# The demo's commands say `python3`: let that be the venv's interpreter, whatever else PATH holds (a
# pyenv shim, say, lives under $HOME, which the sandbox hides).
export PATH="$PWD/.venv/bin:$PATH"
exec .venv/bin/crucible demo "$@"
