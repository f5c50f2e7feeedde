#!/usr/bin/env bash
# Set up and run the whole test suite. Integration tests start their own PostgreSQL 15
# server on 127.0.0.1 (tests/pg.py); browser tests start the API under uvicorn and drive headless
# Chromium. Only setup (pip, npm ci, apt-get chromium) uses a network.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# the browser tests (tests/browser) need the built UI and Debian's chromium (never a downloaded browser)
bash scripts/build_frontend.sh
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  (apt-get update -qq && apt-get install -y -qq chromium) >/dev/null || echo "test.sh: could not install chromium" >&2
fi
# lint and format first: a style error fails the run before the slow tests start
.venv/bin/ruff check .
.venv/bin/ruff format --check .
export LITELLM_LOCAL_MODEL_COST_MAP=True HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
exec .venv/bin/python -m pytest -q "$@"
