#!/usr/bin/env bash
# Set up, build the web UI when needed, ingest the sample PDFs (samples/) and serve API + UI on 127.0.0.1:8000.
# Everything is stored under ./data (override with RAGAUDIT_DATA_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build_frontend.sh
export RAGAUDIT_DATA_DIR=${RAGAUDIT_DATA_DIR:-$PWD/data}
.venv/bin/ragaudit ingest samples
exec .venv/bin/ragaudit serve --host "${HOST:-127.0.0.1}" --port "${PORT:-8000}"
