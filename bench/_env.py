"""Imported first by every bench script: offline defaults and the repository on ``sys.path``.

Sets ``LITELLM_LOCAL_MODEL_COST_MAP=True``, ``HF_HUB_OFFLINE=1`` and ``TOKENIZERS_PARALLELISM=false``
unless already set (no network at run time; the bundled model is used as shipped), and puts the
repository root (``ROOT``) first on ``sys.path`` when it is not there, so the ``ragaudit`` package
comes from this checkout whether a script runs as ``python -m bench.NAME`` or as a file
(``python bench/NAME.py``, where ``sys.path[0]`` is ``bench/`` itself). ``SHARED`` is the team's
evaluation corpus beside the checkout (``../shared/corpus``: the dev PDFs and questions), which the
benchmarks and the dev-set evaluation read by default; ``need_corpus`` stops a script with a clear
message when it is missing. Each script imports it with::

    if __package__:  # python -m bench.NAME
        from ._env import ROOT
    else:  # python bench/NAME.py
        from _env import ROOT
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared" / "corpus"


def need_corpus(*paths: Path) -> None:
    """Exit (status 1) naming every path of ``paths`` that does not exist, and saying where the
    default corpus is expected and how to point the script elsewhere."""
    missing = [str(p) for p in paths if not Path(p).exists()]
    if missing:
        sys.exit(
            f"bench: {', '.join(missing)} not found. The benchmarks and the dev-set evaluation read the "
            f"team's evaluation corpus (dev PDFs and dev_questions.jsonl) from {SHARED}, beside this "
            "checkout; pass --pdfs DIR (and --dataset FILE where the script takes one) to use other files. "
            "The test suite needs none of it."
        )
