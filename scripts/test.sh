#!/usr/bin/env bash
# Set up and run the whole test suite. Integration tests start their own PostgreSQL 15
# server on 127.0.0.1 (tests/pg.py); browser tests start the API under uvicorn and drive headless
# Chromium. Only setup (pip, npm ci, apt-get chromium and postgresql when missing) uses a network. Each setup step prints
# when it starts and how long it took (scripts/steps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/steps.sh
bash scripts/setup.sh
# the browser tests (tests/browser) need the built UI and Debian's chromium (never a downloaded browser)
bash scripts/build_frontend.sh
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  step "chromium for the browser tests (apt-get)" \
    bash -c '(apt-get update -qq && apt-get install -y -qq chromium) >/dev/null' \
    || echo "test.sh: could not install chromium" >&2
fi
# the integration tests start a PostgreSQL server of their own (tests/pg.py: its binaries, or PG_BIN)
if [ -z "${PG_BIN:-}" ] && ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null && command -v apt-get >/dev/null 2>&1; then
  step "postgresql for the integration tests (apt-get)" \
    bash -c '(apt-get update -qq && apt-get install -y -qq postgresql) >/dev/null' \
    || echo "test.sh: could not install postgresql" >&2
fi
# lint, format and import layers first: an error fails the run before the slow tests start
step "ruff check" .venv/bin/ruff check .
step "ruff format --check" .venv/bin/ruff format --check .
# imports flow downward through the stages ([tool.importlinter] in pyproject.toml)
step "lint-imports" scripts/lint_imports.sh
export LITELLM_LOCAL_MODEL_COST_MAP=True HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
echo "==> tests: pytest -q $*"
exec .venv/bin/python -m pytest -q "$@"
