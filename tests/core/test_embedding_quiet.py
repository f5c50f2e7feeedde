"""Loading the bundled model prints no third-party progress bar on stderr (the CLI's progress and
result lines are ours)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_loading_the_model_prints_no_loading_weights_bar():
    """Fails if transformers' "Loading weights" tqdm bar reaches stderr when ``Embedder`` loads
    the bundled model and embeds a text (it did in every ``ragaudit ingest``/``eval``/bench run)."""
    code = "from ragaudit.index.embedding import Embedder; e = Embedder(); print(e.embed(['hello world']).shape)"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip().endswith("(1, 384)")
    assert "Loading weights" not in res.stderr, res.stderr[-2000:]
