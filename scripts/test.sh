#!/usr/bin/env bash
# README's test command: install crucible with its dev extras into ./.venv, make sure what the tests need
# is there (PostgreSQL, bubblewrap, the coding-agent CLIs, Octokit), check the code (ruff, mypy, the layer
# contracts) and run the whole test suite, slow end-to-end tests included. Extra arguments go to pytest (for example a subset of tests/).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== venv"
bash scripts/venv.sh dev
export PATH="$PWD/.venv/bin:$PATH"

echo "== bubblewrap"
source scripts/testenv/bwrap.sh
ensure_bwrap

echo "== browser (chromium, axe-core)"
source scripts/testenv/browser.sh
ensure_browser

echo "== commitlint"
source scripts/testenv/commitlint.sh
ensure_commitlint

echo "== Octokit (npm; cached outside the clone)"
source scripts/testenv/octokit.sh
ensure_octokit

echo "== coding-agent CLIs (npm, PyPI; cached outside the clone)"
source scripts/testenv/agents.sh
ensure_agents

echo "== PostgreSQL"
source scripts/testenv/postgres.sh
trap pg_throwaway_stop EXIT
ensure_postgres

# mypy keeps its cache outside the clone, like the npm and agent caches: a fresh clone (what CI makes)
# otherwise checks all 330 modules from scratch (~21 s); with the cache only the files whose content
# changed (mypy compares hashes, so a new checkout's mtimes do not invalidate it).
export MYPY_CACHE_DIR="${MYPY_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/crucible/mypy}"

# Bytecode for crucible and the tests' helpers, for every process the tests start (the examples are
# left out: they are copied into the demo's repositories as they are).
python -m compileall -q -j 0 -x '/examples/' controller tests bench >/dev/null || true

echo "== ruff";        ruff check controller tests bench
echo "== ruff format"; ruff format --check controller tests bench
echo "== mypy";        mypy
echo "== mypy bench";  mypy --explicit-package-bases bench
echo "== import contracts"; lint-imports

echo "== Kubernetes control plane"; bash scripts/k8s/up; export CRUCIBLE_K8S_REQUIRED=1
echo "== pytest"
# The slowest tests, printed at the end: where the suite's own time goes (issue 23 keeps it under 10 min).
python -m pytest -q -n "${CRUCIBLE_TEST_WORKERS:-2}" --durations=40 "$@"
