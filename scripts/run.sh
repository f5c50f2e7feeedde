#!/usr/bin/env bash
# Set up, build the web UI when needed, ingest the sample PDFs (samples/) and serve API + UI.
# Address: RAGAUDIT_HOST and RAGAUDIT_PORT (default 127.0.0.1:8000; HOST and PORT are accepted as
# short forms), the settings the Dagster webserver and daemon read to reach this server: give them
# the same values (docs/operations.md). Everything is stored under ./data (RAGAUDIT_DATA_DIR).
# Each step prints when it starts and how long it took (scripts/steps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/steps.sh
t_all=$EPOCHREALTIME
bash scripts/setup.sh
bash scripts/build_frontend.sh
export RAGAUDIT_DATA_DIR=${RAGAUDIT_DATA_DIR:-$PWD/data}
export RAGAUDIT_HOST=${RAGAUDIT_HOST:-${HOST:-127.0.0.1}}
export RAGAUDIT_PORT=${RAGAUDIT_PORT:-${PORT:-8000}}
step "ingesting the sample PDFs (samples/; unchanged ones are skipped)" .venv/bin/ragaudit ingest samples
case "$RAGAUDIT_HOST" in 0.0.0.0 | "") probe=127.0.0.1 ;; :: | "[::]") probe=::1 ;; *) probe=$RAGAUDIT_HOST ;; esac
case "$probe" in *:*) shown="[$probe]" ;; *) shown=$probe ;; esac
url="http://$shown:$RAGAUDIT_PORT"
echo "==> starting the server at $url/ (set up in $(since "$t_all") s)"
echo "    Dagster UI in another shell: export RAGAUDIT_DATA_DIR=$RAGAUDIT_DATA_DIR RAGAUDIT_HOST=$RAGAUDIT_HOST" \
  "RAGAUDIT_PORT=$RAGAUDIT_PORT DAGSTER_HOME=$RAGAUDIT_DATA_DIR/dagster_home (docs/operations.md)"
t_serve=$EPOCHREALTIME
# reports when the server first answers /health (a plain HTTP request on bash's /dev/tcp); it
# ends when the server (this process, after exec) does. Forked twice, so that init, not the
# server that replaces this shell, reaps it when it ends (no defunct child under the server)
( (
  while kill -0 $$ 2>/dev/null; do
    if { exec 3<>"/dev/tcp/$probe/$RAGAUDIT_PORT"; } 2>/dev/null; then
      printf 'GET /health HTTP/1.0\r\nHost: %s\r\n\r\n' "$shown" >&3
      if IFS= read -r -t 60 status <&3 && [ -n "$status" ]; then
        echo "    server: answering at $url/ (${status%$'\r'} on /health) $(since "$t_serve") s after start," \
          "$(since "$t_all") s after run.sh started"
        exit 0
      fi
      exec 3>&-
    fi
    sleep 0.5
  done
) & )
exec .venv/bin/ragaudit serve
