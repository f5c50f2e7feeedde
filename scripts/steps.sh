# Sourced by the setup scripts: each step says what it is doing when it starts and how long it took.
#   step "LABEL" CMD...   prints "==> LABEL", runs CMD, then "    LABEL: done in 12.3 s"
#                         (or "FAILED (exit N) after 12.3 s" on stderr, returning CMD's status)
#   skip "LABEL" WHY      prints "==> LABEL: skipped (WHY)"
#   since T0              seconds since T0 (an $EPOCHREALTIME value), one decimal
# Times come from bash's $EPOCHREALTIME (bash 5); no subprocess per measurement.

since() {
  local now=${EPOCHREALTIME/[.,]/} t0=${1/[.,]/}
  local ms=$(((now - t0) / 1000))
  printf '%d.%d' $((ms / 1000)) $(((ms % 1000) / 100))
}

step() {
  local label=$1 t0=$EPOCHREALTIME rc=0
  shift
  echo "==> $label"
  "$@" || rc=$?
  if [ "$rc" -eq 0 ]; then
    echo "    $label: done in $(since "$t0") s"
  else
    echo "    $label: FAILED (exit $rc) after $(since "$t0") s" >&2
  fi
  return "$rc"
}

skip() {
  echo "==> $1: skipped ($2)"
}
