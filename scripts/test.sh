#!/usr/bin/env bash
# README's test command: install crucible with its dev extras into ./.venv, check the code (ruff, mypy,
# the layer contracts) and run the whole test suite, slow end-to-end tests included.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/venv.sh dev
export PATH="$PWD/.venv/bin:$PATH"
echo "== ruff";        ruff check controller tests bench
echo "== ruff format"; ruff format --check controller tests bench
echo "== mypy";        mypy
echo "== import contracts"; lint-imports
echo "== pytest"
exec python -m pytest -q -n "${CRUCIBLE_TEST_WORKERS:-2}" "$@"
