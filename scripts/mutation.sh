#!/usr/bin/env bash
# Mutation testing (mutmut 3) of the modules that carry the audit claims: citations and answer
# labels (ragaudit/answer/citations.py), scope enforcement (ragaudit/retrieve/scope.py), metrics (ragaudit/evaluate/metrics.py), the
# judge and its control (ragaudit/evaluate/judge.py). Configured in pyproject.toml [tool.mutmut] to run only
# their fast tests. Slow (~15-25 min on 2 cores), so it is NOT part of CI (scripts/test.sh).
# Prints the score per module: killed / all mutants ("no tests" and "survived" count against it).
# Survivors: `mutmut show NAME` shows the diff; docs/testing.md "Mutation testing" lists the accepted ones.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
export LITELLM_LOCAL_MODEL_COST_MAP=True HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
rm -rf mutants
"$PY" -m mutmut run --max-children "${MUTMUT_CHILDREN:-2}" >/dev/null || true
"$PY" -m mutmut results --all true > mutants/results.txt
"$PY" - <<'PY'
import collections, re
per = collections.defaultdict(collections.Counter)
for line in open("mutants/results.txt"):
    m = re.match(r"\s+(core\.\w+)\.\S+: (.+)$", line)
    if m:
        per[m.group(1)][m.group(2).strip()] += 1
total = collections.Counter()
print(f"{'module':<18} {'killed':>7} {'survived':>9} {'no tests':>9} {'other':>6} {'score':>7}")
for mod, c in sorted(per.items()):
    total.update(c)
    n = sum(c.values())
    other = n - c["killed"] - c["survived"] - c["no tests"]
    print(f"{mod:<18} {c['killed']:>7} {c['survived']:>9} {c['no tests']:>9} {other:>6} {c['killed'] / n:>7.1%}")
n = sum(total.values())
print(f"{'total':<18} {total['killed']:>7} {total['survived']:>9} {total['no tests']:>9} "
      f"{n - total['killed'] - total['survived'] - total['no tests']:>6} {total['killed'] / max(n, 1):>7.1%}")
PY
echo "survivors: grep -v ': killed' mutants/results.txt; diff of one: $PY -m mutmut show NAME"
