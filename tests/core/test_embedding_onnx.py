"""The ONNX Runtime embedding backend (``ragaudit.index.embedding``, ``embedding_backend=onnx``, the default):
the same vectors as sentence-transformers' torch encode on real chunk texts, an export made once
per key into its cache (atomic, locked against a second process), the torch backend still
selectable, and model configurations it does not implement refused by name. Real model, real
PDFs, no mocks; no timing (speed lives in the bench: docs/benchmarks.md, "Embedding backend")."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from ragaudit.index import embedding
from ragaudit.index.embedding import (
    Embedder,
    UnsupportedModelError,
    cores_busy,
    onnx_model_file,
    read_pooling,
    resolve_model_path,
)
from ragaudit.platform.settings import BUNDLED_EMBEDDING_MODEL
from tests.conftest import DATA, ROOT, SAMPLES

MIN_COSINE = 0.99999  # measured: min 0.9999998 on chunk texts and windows of a real paper
PDF = DATA / "2023 Q1 NVDA.pdf"
QUESTIONS = [
    "What was NVIDIA's revenue for the first quarter of fiscal 2024?",
    "How many shares of common stock were outstanding?",
    "What is the Commission File Number on the cover page?",
    "Which market platform grew fastest year on year?",
    "What was the probable cause of the accident?",
    "截至2023年3月末，发行人的各类授信额度总额是多少？",
    "On what date was the Digital Millennium Copyright Act signed into law?",
    "Which library does DPR use to index the passage embeddings offline?",
]


@pytest.fixture(scope="module")
def torch_embedder():
    from ragaudit.services import shared_embedder

    return shared_embedder(BUNDLED_EMBEDDING_MODEL, backend="torch")


def _chunk_texts(embedder) -> list[str]:
    """What ingestion embeds for a real PDF: each chunk's header + text (``ragaudit.ingest.documents``)."""
    from ragaudit.ingest.chunking import chunk_document, document_title
    from tests.pdf_pages import pages as extract_pages_once

    pages = extract_pages_once(PDF)
    chunks = chunk_document(pages, embedder, document_title(PDF.name, pages))
    return [f"{c.header}\n{c.text}" if c.header else c.text for c in chunks]


def test_onnx_vectors_match_sentence_transformers_on_real_chunk_texts(embedder, torch_embedder):
    """Every chunk text of a real 10-Q (tables, numbers; padded together in length-sorted batches
    of mixed lengths, also split across cores and with a core declared busy) and a few questions
    embed on the onnx backend to unit float32 rows of the model's dimension within cosine
    ``MIN_COSINE`` of sentence-transformers' torch ``encode``, row by row.
    Fails if the export or the pooling is wrong (CLS or unmasked mean: padded rows drift), rows are
    put back in the wrong order after the length sort or the per-core split, normalisation is
    missing, or the default backend is not onnx."""
    assert embedder.backend == "onnx" and embedder.onnx_file is not None and embedder.onnx_file.is_file()
    texts = _chunk_texts(embedder)
    assert len(texts) >= 20
    questions = QUESTIONS
    want = torch_embedder.model.encode(
        texts + questions, batch_size=32, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
    )
    got = embedder.embed(texts + questions)
    with cores_busy():
        busy = embedder.embed(texts[:40])
    one = np.stack([embedder.embed_query(q) for q in questions])
    assert got.shape == want.shape == (len(texts) + len(questions), embedder.dim) == (len(texts) + 8, 384)
    assert got.dtype == np.float32
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    cos = np.sum(got * want, axis=1)
    assert float(cos.min()) >= MIN_COSINE, (float(cos.min()), int(cos.argmin()))
    assert float(np.sum(busy * want[:40], axis=1).min()) >= MIN_COSINE
    assert float(np.sum(one * want[-8:], axis=1).min()) >= MIN_COSINE


def test_onnx_runs_one_part_per_free_core(embedder, monkeypatch):
    """An onnx encode call splits its batch into one concurrent single-thread run per core (2 parts
    on this 2-core machine), and into one fewer while a parse child declares a core busy; a single
    text is one run. Fails if ``cores_busy`` is ignored by the onnx backend (the model would fight
    the parser for its core) or if the split is lost (one core idle during bulk embedding)."""
    seen: list[tuple[int, int]] = []
    real = embedder._onnx._forward
    monkeypatch.setattr(embedder._onnx, "_forward", lambda texts: (seen.append(len(texts)), real(texts))[1])
    texts = [f"sentence {i} about revenue" for i in range(10)]
    embedder.embed(texts)
    free = list(seen)
    seen.clear()
    with cores_busy():
        embedder.embed(texts)
    busy = list(seen)
    seen.clear()
    embedder.embed(["one question?"])
    import psutil

    if (psutil.cpu_count(logical=False) or 1) >= 2:
        assert embedder.threads >= 2
    assert len(free) == embedder.threads and sum(free) == 10
    assert len(busy) == max(1, embedder.threads - 1) and sum(busy) == 10
    assert seen == [1]


def test_export_is_made_once_reused_and_remade_when_the_key_changes(tmp_path, monkeypatch):
    """The first ``onnx_model_file`` into an empty cache exports one file (no temporary left);
    a second call and a second ``Embedder`` on the same cache reuse it (same inode and mtime, and
    ``export_onnx`` is not called again); a changed key (``ONNX_EXPORT_REVISION`` bumped, as a
    new torch or transformers version or other weights change it) exports a new file beside it.
    Fails if the cache is ignored (every start pays the export), the file is written in place
    (a reader could load half a file), or the key does not cover the export's inputs."""
    path = resolve_model_path(BUNDLED_EMBEDDING_MODEL)
    cache = tmp_path / "cache"
    first = onnx_model_file(path, cache)
    st = first.stat()
    assert first.parent == cache and first.suffix == ".onnx" and st.st_size > 10_000_000
    assert [p.name for p in cache.iterdir() if p.name.endswith(".tmp")] == []

    calls: list[Path] = []
    real_export = embedding.export_onnx
    monkeypatch.setattr(embedding, "export_onnx", lambda p, out: (calls.append(out), real_export(p, out))[1])
    again = onnx_model_file(path, cache)
    e = Embedder(BUNDLED_EMBEDDING_MODEL, backend="onnx", cache_dir=cache)
    assert again == first == e.onnx_file and calls == []
    st2 = first.stat()
    assert (st2.st_ino, st2.st_mtime_ns) == (st.st_ino, st.st_mtime_ns)
    assert e.embed(["reused export"]).shape == (1, 384)

    monkeypatch.setattr(embedding, "ONNX_EXPORT_REVISION", embedding.ONNX_EXPORT_REVISION + 1)
    other = onnx_model_file(path, cache)
    assert other != first and other.is_file() and len(calls) == 1
    assert sorted(p.name for p in cache.glob("*.onnx")) == sorted([first.name, other.name])


def test_two_processes_starting_together_make_one_valid_file(tmp_path, torch_embedder):
    """Two processes asking for the export into the same empty cache at the same moment (the API
    and Dagster starting together) get the same path; exactly one of them exports (the other waits
    on the file lock and reuses it), no temporary file is left, and the file gives
    sentence-transformers' vector for a text. Fails without the lock (both export; a reader can
    meet a half-written file) or without the atomic rename."""
    cache = tmp_path / "cache"
    go = tmp_path / "go"
    code = textwrap.dedent(f"""
        import logging, os, sys, time
        sys.path.insert(0, {str(ROOT)!r})
        logging.basicConfig(level=logging.WARNING, format="%(message)s")
        from pathlib import Path
        from ragaudit.index.embedding import onnx_model_file, resolve_model_path
        path = resolve_model_path("bundled:all-MiniLM-L6-v2")
        import torch, transformers  # imported before the start line: both processes reach the lock together
        while not os.path.exists({str(go)!r}):
            time.sleep(0.01)
        print(onnx_model_file(path, Path({str(cache)!r})))
    """)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        for _ in range(2)
    ]
    try:
        go.touch()
        outs = [p.communicate(timeout=300) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert [p.returncode for p in procs] == [0, 0], [o[1][-2000:] for o in outs]
    paths = {o[0].strip().splitlines()[-1] for o in outs}
    assert len(paths) == 1
    assert sum(o[1].count("exported the embedding model") for o in outs) == 1, [o[1][-1000:] for o in outs]
    assert sorted(p.name for p in cache.iterdir() if not p.name.endswith(".lock")) == [Path(paths.pop()).name]

    e = Embedder(BUNDLED_EMBEDDING_MODEL, backend="onnx", cache_dir=cache)
    text = "Revenue for the first quarter was $7.19 billion."
    v = e.embed([text])[0]
    w = torch_embedder.embed([text])[0]
    assert float(v @ w) >= MIN_COSINE


def test_torch_backend_is_still_selectable_through_the_settings(tmp_path, torch_embedder):
    """``RAGAUDIT_EMBEDDING_BACKEND=torch`` gives ``Services`` a torch embedder (no ONNX file) whose
    ``embed`` is sentence-transformers' own encode; an unknown backend is refused by the settings
    and by ``Embedder``. Fails if the setting is not wired through ``Services``/``shared_embedder``
    or the torch path broke."""
    import pydantic

    from ragaudit.platform.settings import Settings
    from ragaudit.services import Services

    os.environ["RAGAUDIT_EMBEDDING_BACKEND"] = "torch"
    try:
        st = Settings(_env_file=None, data_dir=tmp_path)
    finally:
        del os.environ["RAGAUDIT_EMBEDDING_BACKEND"]
    assert st.embedding_backend == "torch"
    assert Settings(_env_file=None, data_dir=tmp_path).embedding_backend == "onnx"
    e = Services(st).embedder
    assert e is torch_embedder and e.backend == "torch" and e.onnx_file is None
    texts = ["The DMCA was signed into law in 1998.", "Net income increased."]
    v = e.embed(texts)
    assert v.shape == (2, 384)
    assert np.allclose(v, e.model.encode(texts, normalize_embeddings=True), atol=1e-6)
    with pytest.raises(pydantic.ValidationError):
        Settings(_env_file=None, data_dir=tmp_path, embedding_backend="tensorrt")
    with pytest.raises(ValueError, match="unknown embedding backend"):
        Embedder(BUNDLED_EMBEDDING_MODEL, backend="tensorrt")


def _model_copy(tmp_path: Path) -> Path:
    """The bundled model folder's small files copied, its weights linked (to edit the configs)."""
    src = resolve_model_path(BUNDLED_EMBEDDING_MODEL)
    dst = tmp_path / "model"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("model.safetensors"))
    (dst / "model.safetensors").symlink_to(src / "model.safetensors")
    return dst


@pytest.mark.parametrize(
    "config, named",
    [
        ({"word_embedding_dimension": 384, "pooling_mode_max_tokens": True}, "max_tokens"),
        (
            {"word_embedding_dimension": 384, "pooling_mode_mean_tokens": True, "pooling_mode_cls_token": True},
            "cls_token",
        ),
        ({"embedding_dimension": 384, "pooling_mode": "lasttoken"}, "lasttoken"),
    ],
)
def test_a_pooling_mode_not_implemented_is_refused_by_name(tmp_path, config, named):
    """A model folder whose ``1_Pooling/config.json`` asks for max pooling, for two modes at once,
    or (new format) last-token pooling is refused by the onnx backend with ``UnsupportedModelError``
    naming the mode and the torch setting, before any export (the cache stays empty); the bundled
    folder reads as mean pooling, 384-d, 256 pieces. Fails if an unknown mode silently falls back
    to mean pooling (other vectors than the model's) or the error does not say what to do."""
    assert read_pooling(resolve_model_path(BUNDLED_EMBEDDING_MODEL)) == {
        "mode": "mean",
        "dim": 384,
        "max_seq_length": 256,
    }
    folder = _model_copy(tmp_path)
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(config))
    cache = tmp_path / "cache"
    with pytest.raises(UnsupportedModelError, match="RAGAUDIT_EMBEDDING_BACKEND=torch") as err:
        Embedder(str(folder), backend="onnx", cache_dir=cache)
    assert named in str(err.value)
    assert not cache.exists() or not any(cache.iterdir())


def test_modules_beyond_transformer_pooling_normalize_are_refused(tmp_path):
    """A model folder with a Dense layer after pooling (modules.json), or one that asks
    sentence-transformers to lower-case its inputs, is refused by the onnx backend with a message
    naming the cause. Fails if the backend drops a module it does not run (different vectors)."""
    folder = _model_copy(tmp_path)
    modules = json.loads((folder / "modules.json").read_text())
    modules.insert(2, {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})
    (folder / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(UnsupportedModelError, match="Dense"):
        read_pooling(folder)
    folder2 = _model_copy(tmp_path / "b")
    (folder2 / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 256, "do_lower_case": True}))
    with pytest.raises(UnsupportedModelError, match="lower-case"):
        read_pooling(folder2)


CJK_PDF = DATA / "chinese-tables.pdf"
TOKENIZER_PDFS = [PDF, CJK_PDF, DATA / "karpukhin2020-dpr.pdf", SAMPLES / "dmca.pdf", DATA / "f1040nr.pdf"]


def _real_texts(embedder) -> list[str]:
    """Chunk texts (header + text, as ingestion embeds them) and whole page texts (many beyond
    ``max_seq_length``) of real PDFs, Chinese tables included, plus a few edge strings (Latin
    identifiers glued into Chinese text among them)."""
    from ragaudit.ingest.chunking import chunk_document, document_title
    from tests.pdf_pages import pages as extract_pages_once

    texts: list[str] = []
    for pdf in TOKENIZER_PDFS:
        pages = extract_pages_once(pdf)
        texts += [p.text for p in pages]
        chunks = chunk_document(pages, embedder, document_title(pdf.name, pages))
        texts += [f"{c.header}\n{c.text}" if c.header else c.text for c in chunks]
    glued = ["模型服务主要部署在Amazon上", "监控指标istio_requests_total和DCGM_FI_DEV_GPU_UTIL", "g4dn.xlarge实例"]
    return texts + glued + ["", " ", "[CLS] a literal [SEP] and [MASK] token", "Ünïcödé — ‘quotes’ …", "x" * 300]


def test_tokenizers_library_gives_autotokenizer_pieces_offsets_and_model_inputs(embedder):
    """The onnx backend's ``FastTokenizer`` (the folder's tokenizer.json run by the ``tokenizers``
    library) gives exactly what ``transformers.AutoTokenizer`` gives on real chunk and page texts
    of five real PDFs (Chinese tables included, pages beyond ``max_seq_length``): the word-piece
    counts (``count_tokens``, no special tokens, no truncation), every piece's character offsets
    (``token_offsets``) and the model inputs of mixed-length batches (ids, attention mask, token
    types; [CLS]/[SEP], truncated to 256 longest-first, right-padded with [PAD]). Fails if the
    file's own truncation (128) or fixed padding leaks into counts, a special token or the pad id
    differs, or offsets drift on CJK text: chunk budgets and vectors would change."""
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(str(embedder.path), local_files_only=True)
    texts = _real_texts(embedder)
    counts = embedder.count_tokens(texts)
    assert counts == [len(ids) for ids in hf(texts, add_special_tokens=False, truncation=False)["input_ids"]]
    assert max(counts) > 4 * embedder.max_seq_length and sum(c > embedder.max_seq_length for c in counts) >= 20
    assert sum(any("\u4e00" <= ch <= "\u9fff" for ch in t) for t in texts) >= 10  # CJK texts among them
    for t in texts:
        want = hf(t, add_special_tokens=False, truncation=False, return_offsets_mapping=True)["offset_mapping"]
        assert embedder.token_offsets(t) == [tuple(o) for o in want], t[:80]
    for i in range(0, len(texts), 32):  # document order: short and long texts padded together
        batch = texts[i : i + 32]
        want = hf(
            batch, padding=True, truncation="longest_first", max_length=embedder.max_seq_length, return_tensors="np"
        )
        got = embedder.tokenizer.model_inputs(batch)
        assert set(got) == {"input_ids", "attention_mask", "token_type_ids"} == set(want)
        for name in got:
            assert got[name].dtype == np.int64 and np.array_equal(got[name], want[name]), (i, name)


def test_chunks_are_the_same_on_both_backends(embedder, torch_embedder):
    """``chunk_document`` on a real 10-Q and on Chinese tables cuts the same chunks (texts,
    offsets, headers, pages) with the onnx backend's tokenizer as with the torch backend's
    (transformers') one. Fails if a token count or offset differs anywhere budgets are checked."""
    from ragaudit.ingest.chunking import chunk_document, document_title
    from tests.pdf_pages import pages as extract_pages_once

    for pdf in (PDF, CJK_PDF):
        pages = extract_pages_once(pdf)
        title = document_title(pdf.name, pages)
        got = chunk_document(pages, embedder, title)
        assert len(got) >= 5 and got == chunk_document(pages, torch_embedder, title)


_HEAVY = ("torch", "transformers", "sentence_transformers")


def _fresh_python(code: str, tmp_path: Path) -> dict:
    """Run ``code`` in a new Python (repository on the path, test data dir, no LLM/servers); its
    last stdout line is JSON, returned."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGAUDIT_")}
    env.update(
        {
            "HF_HUB_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "RAGAUDIT_DATA_DIR": str(tmp_path / "data"),
            "PYTHONPATH": str(ROOT),
        }
    )
    if os.environ.get("RAGAUDIT_EMBEDDING_CACHE_DIR"):
        env["RAGAUDIT_EMBEDDING_CACHE_DIR"] = os.environ["RAGAUDIT_EMBEDDING_CACHE_DIR"]
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_default_services_embed_and_chunk_without_torch_or_transformers(tmp_path, embedder):
    """A fresh Python that builds the default ``Services`` embedder (onnx), embeds a question,
    embeds and chunks a real PDF has not imported torch, transformers or sentence-transformers
    (~400 MB resident memory), and its vectors are the suite's onnx embedder's. Fails if anything
    on that path imports them (the tokenizer, the export, a logging call, a type import)."""
    out = _fresh_python(
        f"""
        import json, sys
        from ragaudit.services import Services
        from ragaudit.platform.settings import Settings
        from ragaudit.ingest.chunking import chunk_document, document_title
        from ragaudit.ingest.pdf import extract_pages
        e = Services(Settings(_env_file=None)).embedder
        q = e.embed_query("What was the revenue in the first quarter?")
        pages = extract_pages(open({str(CJK_PDF)!r}, "rb").read())
        chunks = chunk_document(pages, e, document_title("chinese-tables.pdf", pages))
        v = e.embed([c.text for c in chunks[:4]])
        print(json.dumps({{"backend": e.backend, "chunks": len(chunks), "q": q.tolist(), "v0": v[0].tolist(),
                          "heavy": [m for m in {_HEAVY!r} if m in sys.modules]}}))
    """,
        tmp_path,
    )
    assert out["backend"] == "onnx" and out["chunks"] >= 5
    assert out["heavy"] == []
    assert float(np.dot(out["q"], embedder.embed_query("What was the revenue in the first quarter?"))) >= MIN_COSINE


def test_cli_ingest_and_ask_do_not_import_torch_or_transformers(tmp_path):
    """``ragaudit ingest`` of a real PDF then ``ragaudit ask`` (embedded store, extractive answer,
    onnx backend, no reranker) in one fresh process: both succeed and torch, transformers and
    sentence-transformers were never imported. (A configured reranker, a CrossEncoder, or
    ``RAGAUDIT_EMBEDDING_BACKEND=torch`` load them on purpose.) Fails if the CLI's start-up
    (logging set-up) or its ingest/ask path imports them."""
    pdf = ROOT / "samples" / "dmca.pdf"
    out = _fresh_python(
        f"""
        import json, sys
        from ragaudit.api.cli import app
        codes = []
        for args in (["ingest", {str(pdf)!r}], ["ask", "When was the DMCA signed into law?"]):
            try:
                app(args, standalone_mode=False)
                codes.append(0)
            except SystemExit as e:
                codes.append(e.code)
        print(json.dumps({{"codes": codes, "heavy": [m for m in {_HEAVY!r} if m in sys.modules]}}))
    """,
        tmp_path,
    )
    assert out["codes"] == [0, 0]
    assert out["heavy"] == []
