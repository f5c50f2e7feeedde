#!/usr/bin/env bash
# Set up, ingest the sample PDFs (samples/) and serve the API on 127.0.0.1:8000.
# Everything is stored under ./data (override with RAGAUDIT_DATA_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export RAGAUDIT_DATA_DIR=${RAGAUDIT_DATA_DIR:-$PWD/data}
.venv/bin/ragaudit ingest samples
exec .venv/bin/ragaudit serve --host "${HOST:-127.0.0.1}" --port "${PORT:-8000}"
