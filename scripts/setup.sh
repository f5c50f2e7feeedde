#!/usr/bin/env bash
# Create .venv and install ragaudit with its dependencies (idempotent; re-runs only when
# pyproject.toml changed). torch is installed first, pinned to the CPU build. Each step prints
# when it starts and how long it took (scripts/steps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/steps.sh
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
if [ ! -x .venv/bin/python ]; then
  step "Python: creating .venv with $PY" "$PY" -m venv .venv
fi
stamp=.venv/.ragaudit-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  step "Python packages: pip" .venv/bin/python -m pip install --quiet --upgrade pip
  step "Python packages: torch 2.13.0 (CPU build; the largest download)" \
    .venv/bin/python -m pip install --quiet torch==2.13.0
  step "Python packages: ragaudit and its dependencies (pyproject.toml)" \
    .venv/bin/python -m pip install --quiet -e '.[dev]'
  echo "$want" > "$stamp"
else
  skip "Python packages" "installed for this pyproject.toml"
fi
