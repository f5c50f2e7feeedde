"""Loading the Dagster definitions prints no warning of ours on stderr (every CLI command,
server start and Dagster code location loads them)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def test_definitions_load_without_preview_or_deprecation_warnings():
    """Fails if the partitioned asset checks' PreviewWarning comes back (it printed twice on every
    ``ragaudit`` command) or if ``define_asset_job`` is given ``partitions_def`` again
    (deprecated: inferred from the assets). Warnings are shown (``-W default``) so a hidden
    DeprecationWarning counts too."""
    p = subprocess.run(
        [sys.executable, "-W", "default", "-c", "import ragaudit.pipelines.definitions"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert "PreviewWarning" not in p.stderr, p.stderr[-2000:]
    assert "define_asset_job" not in p.stderr, p.stderr[-2000:]
