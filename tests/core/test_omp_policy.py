"""The OpenMP wait policy is set before torch loads (see ragaudit/__init__.py)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_openmp_threads_wait_passively_when_core_is_imported_first():
    """Fails if ``core`` stops setting OMP_WAIT_POLICY=PASSIVE (spinning OpenMP threads made a
    query embedding 50x slower under load), or if an explicit setting is overridden."""
    code = (
        "import os; os.environ.pop('OMP_WAIT_POLICY', None); import ragaudit, ragaudit.index.embedding; "
        "print(os.environ['OMP_WAIT_POLICY'])"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "PASSIVE", out.stderr
    code = "import os; os.environ['OMP_WAIT_POLICY'] = 'ACTIVE'; import ragaudit; print(os.environ['OMP_WAIT_POLICY'])"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "ACTIVE", out.stderr
