"""Imported first by every bench script: offline defaults and the repository on ``sys.path``.

Sets ``LITELLM_LOCAL_MODEL_COST_MAP=True``, ``HF_HUB_OFFLINE=1`` and ``TOKENIZERS_PARALLELISM=false``
unless already set (no network at run time; the bundled model is used as shipped), and puts the
repository root (``ROOT``) first on ``sys.path`` when it is not there, so ``core``, ``api`` and
``pipelines`` come from this checkout whether a script runs as ``python -m bench.NAME`` or as a file
(``python bench/NAME.py``, where ``sys.path[0]`` is ``bench/`` itself). Each script imports it with::

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
