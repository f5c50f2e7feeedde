#!/usr/bin/env bash
# Build the web UI (frontend/ -> frontend/dist, served by the API at /) when it is missing or older
# than its sources. `npm ci` installs exactly the committed package-lock.json (again only when the
# lockfile changed). Needs Node 20+ and npm; without them the API still runs, without the UI.
# Each step prints when it starts and how long it took (scripts/steps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/steps.sh
cd frontend
if ! command -v npm >/dev/null 2>&1; then
  echo "build_frontend: npm not found; the API will run without the web UI (install Node 20 + npm)" >&2
  exit 0
fi
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  step "npm packages: npm ci (frontend/package-lock.json)" npm ci --no-audit --no-fund --loglevel=error
else
  skip "npm packages" "node_modules matches package-lock.json"
fi
stale=0
if [ ! -f dist/index.html ]; then
  stale=1
elif [ -n "$(find src public index.html package.json package-lock.json vite.config.ts tsconfig.json -newer dist/index.html -print -quit)" ]; then
  stale=1
fi
if [ "$stale" = 1 ]; then
  step "web UI: type check and build (frontend/dist)" npm run build --silent
else
  skip "web UI build" "frontend/dist is newer than its sources"
fi
