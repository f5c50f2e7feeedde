#!/usr/bin/env bash
# The layers contract ([tool.importlinter] in pyproject.toml) over the package as it installs:
# the folders api/, pipelines/ and sql/ install as ragaudit.api, ragaudit.pipelines and
# ragaudit.sql (package-dir), and the code imports them by those names. import-linter reads a
# package from one directory tree, so that tree is assembled in a temporary folder first.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tree="$(mktemp -d)"
trap 'rm -rf "$tree"' EXIT
cp -r "$root/ragaudit" "$tree/ragaudit"
for sub in api pipelines sql; do cp -r "$root/$sub" "$tree/ragaudit/$sub"; done
cd "$tree"
PYTHONPATH="$tree" "$root/.venv/bin/lint-imports" "$root/pyproject.toml" "$@"
