#!/usr/bin/env bash
# Set up and run the whole test suite. Integration tests start their own PostgreSQL 15
# server on 127.0.0.1 (tests/pg.py); nothing needs a network.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export LITELLM_LOCAL_MODEL_COST_MAP=True HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
exec .venv/bin/python -m pytest -q "$@"
