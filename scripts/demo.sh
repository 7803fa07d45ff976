#!/usr/bin/env bash
# README's main job: install crucible into ./.venv and run the offline demo on embedded defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/venv.sh
exec .venv/bin/crucible demo "$@"
