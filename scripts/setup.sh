#!/usr/bin/env bash
# Create .venv and install ragaudit with its dependencies (idempotent; re-runs only when
# pyproject.toml changed). torch is installed first, pinned to the CPU build.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.ragaudit-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet torch==2.13.0
  .venv/bin/python -m pip install --quiet -e '.[dev]'
  echo "$want" > "$stamp"
fi
