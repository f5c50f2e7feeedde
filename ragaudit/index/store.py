"""Qdrant vector store: one point per chunk, a named dense vector, a window multivector (MaxSim),
a named sparse BM25 vector (IDF) and, for chunks of documents not in English, a multilingual dense
vector (``MULTILINGUAL``, ``ragaudit.index.multilingual``; English chunks have none).

Three backends, one interface (``VectorStore``; ``open_store`` picks one):

- a Qdrant server when ``qdrant_url`` is set (``qdrant-client``; the scale-out path);
- embedded, ``edge`` (default): Qdrant Edge (``qdrant-edge-py``), Qdrant's in-process engine, in
  ``data_dir/qdrant_edge`` (``EdgeVectorStore``, an adapter: Edge has its own classes, so the
  ``qdrant_client.models`` filters built here are translated);
- embedded, ``local``: qdrant-client's local mode in ``data_dir/qdrant`` (pure Python: every filter
  is evaluated point by point, ~1 s per scoped query at 10k points, see ``bench/store_backends.py``).

Both embedded stores allow one process per folder; Edge's folder is guarded by our own file lock,
taken before Edge opens it (a second process's refused open damages Edge's live writer).
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
import time
import uuid
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Sequence

import qdrant_edge as qe
from filelock import FileLock, Timeout
from qdrant_client import QdrantClient, models

from ragaudit.index.multilingual import DIM as MULTILINGUAL_DIM
from ragaudit.index.sparse import SparseVector
from ragaudit.types import AnyOf, Condition, Match, Not, Range, Scope

log = logging.getLogger(__name__)

DENSE = "dense"
WINDOWS = "dense_windows"
SPARSE = "bm25"
MULTILINGUAL = "dense_multilingual"
POINT_NAMESPACE = uuid.UUID("8f0d3c2e-5b7a-4a51-9a3c-5f1e7c1d2b64")
KEYWORD_FIELDS = ("document_id", "doc_name", "doc_key", "knowledge_base", "strategy", "doc_sha256")
INTEGER_FIELDS = ("page_start", "page_end", "chunk_index", "ingest_version")
BOOL_FIELDS = ("primary", "live")
BACKENDS = ("edge", "local")


class StoreInUseError(RuntimeError):
    """The embedded store's folder is opened by another process (one process per folder)."""


def point_id(document_id: str, ingest_version: int, strategy: str, chunk_index: int) -> str:
    """Deterministic point/chunk id: uuid5 of (document id, ingest version, strategy, chunk index).

    The document id keeps two documents with identical bytes apart (before, ids came from the
    content hash, and a second upload of the same bytes overwrote the first document's points);
    the version keeps a run's new points apart from the live ones it replaces, so a failed run
    never touches what is being searched."""
    return str(uuid.uuid5(POINT_NAMESPACE, f"{document_id}:{ingest_version}:{strategy}:{chunk_index}"))


def _live_only() -> models.FieldCondition:
    """Points of a run that has not published yet carry ``live: false``; nothing searches them."""
    return models.FieldCondition(key="live", match=models.MatchValue(value=False))


def _condition(c: Condition) -> models.FieldCondition | models.Filter:
    """A scope condition (``ragaudit.types``) as a Qdrant condition."""
    if isinstance(c, Match):
        if len(c.values) == 1:  # booleans need MatchValue (Qdrant Edge matches them on an integer shadow)
            return models.FieldCondition(key=c.key, match=models.MatchValue(value=c.values[0]))
        return models.FieldCondition(key=c.key, match=models.MatchAny(any=list(c.values)))
    if isinstance(c, Range):
        return models.FieldCondition(key=c.key, range=models.Range(gte=c.gte, lte=c.lte))
    if isinstance(c, AnyOf):
        return models.Filter(should=[_condition(x) for x in c.conditions])
    raise TypeError(f"no Qdrant condition for {c!r}")


def scope_filter(scope: Scope) -> models.Filter:
    """The Qdrant filter of ``scope``, derived from ``Scope.conditions`` (``ragaudit.types``): its
    conditions are ``must``, its negated ones ``must_not``."""
    must: list[Any] = []
    must_not: list[Any] = []
    for c in scope.conditions():
        if isinstance(c, Not):
            must_not.append(_condition(c.condition))
        else:
            must.append(_condition(c))
    return models.Filter(must=must or None, must_not=must_not or None)


@dataclass
class PointHit:
    id: str
    score: float
    payload: dict[str, Any]


class VectorStore:
    """Thin, typed wrapper over ``QdrantClient`` for the chunk collection (server or local mode).

    The high-level methods (publish, delete, count, search) are written once over a few
    primitives (``_delete``, ``_set_payload``, ``_count``, ``_query``, ``_upsert_points``...);
    ``EdgeVectorStore`` overrides only those. Raises ``qdrant_client`` exceptions (connection
    errors, ``RuntimeError`` when a local store folder is already opened by another process).
    """

    backend = "qdrant-client"

    def __init__(self, collection: str, *, path: str | None = None, url: str | None = None, api_key: str | None = None):
        if url:
            self.client = QdrantClient(url=url, api_key=api_key, timeout=30)
            self.location = url
            self.backend = "server"
        else:
            self.client = QdrantClient(path=path)
            self.location = f"local:{path}"
            self.backend = "local"
        self.local = not url
        self.collection = collection
        self._lock = threading.RLock()
        self._has_windows: bool | None = None

    def close(self) -> None:
        self.client.close()

    # ------------------------------------------------------------------ primitives (qdrant-client)
    def _dense_size(self) -> int | None:
        vectors = self.client.get_collection(self.collection).config.params.vectors
        return vectors[DENSE].size if isinstance(vectors, dict) and DENSE in vectors else None

    def _create(self, dim: int, windows: bool, multilingual: int = 0) -> None:
        vectors = {DENSE: models.VectorParams(size=dim, distance=models.Distance.COSINE)}
        if multilingual:
            vectors[MULTILINGUAL] = models.VectorParams(size=multilingual, distance=models.Distance.COSINE)
        if windows:
            vectors[WINDOWS] = models.VectorParams(
                size=dim,
                distance=models.Distance.COSINE,
                multivector_config=models.MultiVectorConfig(comparator=models.MultiVectorComparator.MAX_SIM),
            )
        self.client.create_collection(
            self.collection,
            vectors_config=vectors,
            sparse_vectors_config={SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)},
        )
        if not self.local:  # local mode ignores payload indexes (and warns): create them on servers
            for name in KEYWORD_FIELDS:
                self.client.create_payload_index(self.collection, name, models.PayloadSchemaType.KEYWORD)
            for name in INTEGER_FIELDS:
                self.client.create_payload_index(self.collection, name, models.PayloadSchemaType.INTEGER)
            for name in BOOL_FIELDS:
                self.client.create_payload_index(self.collection, name, models.PayloadSchemaType.BOOL)

    def _windows_in_collection(self) -> bool:
        vectors = self.client.get_collection(self.collection).config.params.vectors
        return isinstance(vectors, dict) and WINDOWS in vectors

    def _multilingual_in_collection(self) -> bool:
        vectors = self.client.get_collection(self.collection).config.params.vectors
        return isinstance(vectors, dict) and MULTILINGUAL in vectors

    def _upsert_points(
        self, ids: Sequence[str], vectors: list[dict[str, Any]], payloads: Sequence[dict[str, Any]]
    ) -> None:
        points = [
            models.PointStruct(
                id=pid,
                vector={
                    k: (models.SparseVector(indices=v.indices, values=v.values) if k == SPARSE else v)
                    for k, v in vec.items()
                },
                payload=pl,
            )
            for pid, vec, pl in zip(ids, vectors, payloads)
        ]
        self.client.upsert(self.collection, points=points, wait=True)

    def _delete(self, flt: models.Filter) -> None:
        self.client.delete(self.collection, points_selector=models.FilterSelector(filter=flt), wait=True)

    def _set_payload(self, flt: models.Filter, payload: dict[str, Any]) -> None:
        self.client.set_payload(self.collection, payload=payload, points=flt, wait=True)

    def _count(self, flt: models.Filter | None) -> int:
        return self.client.count(self.collection, count_filter=flt, exact=True).count

    def _query(
        self,
        using: str,
        query: Any,
        flt: models.Filter | None,
        limit: int,
        prefetch: tuple[str, Any, int] | None = None,
        with_payload: bool = True,
    ) -> list[PointHit]:
        """Top-``limit`` points by ``query`` on vector ``using`` under ``flt``; with ``prefetch`` =
        ``(using, query, limit)``, only that first stage's top points (same filter) are scored.
        ``with_payload=False``: hits with empty payloads (fetch the ones kept with ``get_payloads``)."""
        if using == SPARSE:
            query = models.SparseVector(indices=query.indices, values=query.values)
        pre = None
        if prefetch is not None:
            pre = models.Prefetch(query=prefetch[1], using=prefetch[0], filter=flt, limit=prefetch[2])
        res = self.client.query_points(
            self.collection,
            query=query,
            using=using,
            query_filter=flt,
            limit=limit,
            prefetch=pre,
            with_payload=with_payload,
        )
        return [PointHit(str(p.id), float(p.score), p.payload or {}) for p in res.points]

    def _scroll(self, flt: models.Filter | None, limit: int, offset: Any) -> tuple[list[tuple[str, dict]], Any]:
        pts, offset = self.client.scroll(
            self.collection, scroll_filter=flt, limit=limit, offset=offset, with_payload=True, with_vectors=False
        )
        return [(str(p.id), p.payload or {}) for p in pts], offset

    def exists(self) -> bool:
        return self.client.collection_exists(self.collection)

    def get_payloads(self, ids: list[str]) -> list[tuple[str, dict]]:
        """Payloads of the given point ids (missing ids are skipped)."""
        if not ids or not self.exists():
            return []
        pts = self.client.retrieve(self.collection, ids=ids, with_payload=True, with_vectors=False)
        return [(str(p.id), p.payload or {}) for p in pts]

    def get_vectors(self, ids: list[str], names: Sequence[str] = (DENSE,)) -> dict[str, dict[str, Any]]:
        """``{point id: {vector name: vector}}`` of the given ids (dense: list of floats;
        windows: list of vectors; sparse: ``SparseVector``); missing ids are skipped."""
        if not ids or not self.exists():
            return {}
        pts = self.client.retrieve(self.collection, ids=ids, with_payload=False, with_vectors=list(names))
        out = {}
        for p in pts:
            vec = p.vector if isinstance(p.vector, dict) else {}
            out[str(p.id)] = {
                k: (SparseVector(list(v.indices), list(v.values)) if k == SPARSE else v)
                for k, v in vec.items()
                if k in names
            }
        return out

    def delete_points(self, ids: list[str]) -> None:
        """Delete points by id (repair and fault-injection tools; ingestion deletes by document)."""
        with self._lock:
            self.client.delete(self.collection, points_selector=models.PointIdsList(points=list(ids)), wait=True)

    # ------------------------------------------------------------------ the store's operations
    def ensure_collection(self, dim: int, *, windows: bool = True, multilingual: int = 0) -> None:
        """Create the collection (cosine dense ``dim``, the ``windows`` MaxSim multivector unless
        ``windows=False``, a ``multilingual``-dimensional cosine vector ``MULTILINGUAL`` when > 0,
        sparse BM25 with IDF) and payload indexes. ``ValueError`` when the collection exists with
        another dense size. An existing collection keeps its vectors (Qdrant adds no named vector
        to a collection): ``has_multilingual`` says whether it has the multilingual one."""
        with self._lock:
            if self.exists():
                have = self._dense_size()
                if have != dim:
                    raise ValueError(
                        f"collection {self.collection!r} has dense size {have}, the embedding model gives {dim}: "
                        "use another collection name or re-ingest into a new one"
                    )
                return
            self._create(dim, windows, multilingual)
            self._has_windows = None
            self._has_multilingual = None

    def has_windows(self) -> bool:
        """True when the collection has the window multivector (collections created before it
        existed have only one dense vector per chunk)."""
        if self._has_windows is None:
            if not self.exists():
                return False
            self._has_windows = self._windows_in_collection()
        return self._has_windows

    def has_multilingual(self) -> bool:
        """True when the collection has the ``MULTILINGUAL`` vector (created with
        ``ensure_collection(..., multilingual=...)``)."""
        if getattr(self, "_has_multilingual", None) is None:
            if not self.exists():
                return False
            self._has_multilingual = self._multilingual_in_collection()
        return self._has_multilingual

    def upsert(
        self,
        ids: Sequence[str],
        dense: Sequence[Sequence[float]],
        sparse: Sequence[SparseVector],
        payloads: Sequence[dict[str, Any]],
        batch_size: int = 256,
        windows: Sequence[Sequence[Sequence[float]]] | None = None,
        multilingual: Sequence[Sequence[float] | None] | None = None,
    ) -> None:
        """Upsert points in batches (idempotent: same ids overwrite). ``windows``: per point, the
        vectors of its sentence windows (stored when the collection has the multivector);
        ``multilingual``: per point, its ``MULTILINGUAL`` vector or None (stored when the
        collection has that vector)."""
        with_windows = windows is not None and self.has_windows()
        with_multi = multilingual is not None and self.has_multilingual()
        for i in range(0, len(ids), batch_size):
            vectors = []
            for j in range(i, min(i + batch_size, len(ids))):
                vector: dict[str, Any] = {DENSE: _floats(dense[j]), SPARSE: sparse[j]}
                if with_windows:
                    vector[WINDOWS] = [_floats(v) for v in windows[j]]
                if with_multi and multilingual[j] is not None:
                    vector[MULTILINGUAL] = _floats(multilingual[j])
                vectors.append(vector)
            with self._lock:  # per batch: a search (or another writer) gets a turn in between
                self._upsert_points(ids[i : i + batch_size], vectors, payloads[i : i + batch_size])

    def _doc_filter(
        self,
        document_id: str,
        keep_sha256: str | None = None,
        only_sha256: str | None = None,
        strategy: str | None = None,
        version: int | None = None,
        live: bool | None = None,
    ) -> models.Filter:
        must: list[Any] = [models.FieldCondition(key="document_id", match=models.MatchValue(value=document_id))]
        must_not: list[Any] = []
        if version is not None:
            must.append(models.FieldCondition(key="ingest_version", match=models.MatchValue(value=version)))
        if live is True:
            must_not.append(_live_only())
        elif live is False:
            must.append(_live_only())
        if strategy:
            must.append(models.FieldCondition(key="strategy", match=models.MatchValue(value=strategy)))
        if only_sha256:
            must.append(models.FieldCondition(key="doc_sha256", match=models.MatchValue(value=only_sha256)))
        if keep_sha256:
            must_not.append(models.FieldCondition(key="doc_sha256", match=models.MatchValue(value=keep_sha256)))
        return models.Filter(must=must, must_not=must_not or None)

    def delete_document(
        self,
        document_id: str,
        *,
        keep_sha256: str | None = None,
        only_sha256: str | None = None,
        strategy: str | None = None,
        version: int | None = None,
        live: bool | None = None,
    ) -> None:
        """Delete a document's points (only that document's: every filter includes its id);
        ``keep_sha256`` spares one content version, ``only_sha256`` / ``version`` / ``strategy`` /
        ``live`` narrow the selection."""
        if not self.exists():
            return
        with self._lock:
            self._delete(self._doc_filter(document_id, keep_sha256, only_sha256, strategy, version, live))

    def set_live(self, document_id: str, version: int, live: bool) -> None:
        """Turn the points of one ingest version of a document searchable (``live``) or back."""
        flt = models.Filter(
            must=[
                models.FieldCondition(key="document_id", match=models.MatchValue(value=document_id)),
                models.FieldCondition(key="ingest_version", match=models.MatchValue(value=version)),
            ]
        )
        with self._lock:
            self._set_payload(flt, {"live": live})

    def delete_replaced(self, document_id: str, version: int, sha256: str, strategy: str) -> None:
        """After ``version`` is published: delete the document's points of other content versions
        (all strategies) and of ``strategy`` at other ingest versions, then make ``strategy`` primary.
        Points of other documents are never selected (the filter includes the document id)."""
        doc = models.FieldCondition(key="document_id", match=models.MatchValue(value=document_id))
        this = models.FieldCondition(key="ingest_version", match=models.MatchValue(value=version))
        same_sha = models.FieldCondition(key="doc_sha256", match=models.MatchValue(value=sha256))
        same_strategy = models.FieldCondition(key="strategy", match=models.MatchValue(value=strategy))
        replaced = models.Filter(
            must=[doc], must_not=[this], should=[models.Filter(must_not=[same_sha]), same_strategy]
        )
        with self._lock:
            self._delete(replaced)
        self.set_primary(document_id, strategy)

    def set_primary(self, document_id: str, strategy: str) -> None:
        """Mark ``strategy`` as the document's primary chunking (searched by default)."""
        doc = models.FieldCondition(key="document_id", match=models.MatchValue(value=document_id))
        same = models.FieldCondition(key="strategy", match=models.MatchValue(value=strategy))
        with self._lock:
            self._set_payload(models.Filter(must=[doc], must_not=[same]), {"primary": False})
            self._set_payload(models.Filter(must=[doc, same]), {"primary": True})

    def count(
        self,
        document_id: str | None = None,
        *,
        sha256: str | None = None,
        strategy: str | None = None,
        version: int | None = None,
        live: bool | None = None,
    ) -> int:
        """Exact number of points, optionally of one document (and content version / strategy /
        ingest version / live state)."""
        if not self.exists():
            return 0
        flt = (
            self._doc_filter(document_id, only_sha256=sha256, strategy=strategy, version=version, live=live)
            if document_id
            else None
        )
        return self._count(flt)

    def count_matching(self, flt: models.Filter | None) -> int:
        """Exact number of points matching ``flt`` (e.g. ``scope_filter(scope)``); 0 before the
        collection exists."""
        return self._count(flt) if self.exists() else 0

    def search_dense(
        self,
        vector: Sequence[float],
        flt: models.Filter | None,
        limit: int,
        windows: bool = False,
        prefetch: int = 0,
        with_payload: bool = True,
    ) -> list[PointHit]:
        """Top-``limit`` by cosine similarity of the dense vector; with ``windows`` (and a collection
        that has them), by MaxSim: the cosine of the chunk's best sentence window.

        ``prefetch`` > ``limit`` (with ``windows``): two stages, the standard Qdrant multivector
        pattern -- the top ``prefetch`` chunks by their single chunk vector (one dot product per
        chunk), then MaxSim over those only, instead of an exact MaxSim scan of every window of
        every chunk in the filter. 0 = the exact scan. ``with_payload=False``: empty payloads."""
        if windows and self.has_windows():
            vec = _floats(vector)
            if prefetch > limit:
                # exact ties come back from the rescoring stage in no fixed order (the CLI and API
                # evaluations of one knowledge base differed until they were ordered): ties by id,
                # a few spare hits so that a tie at the cut does not decide which one is kept
                hits = self._query(
                    WINDOWS,
                    [vec],
                    flt,
                    min(prefetch, limit + 20),
                    prefetch=(DENSE, vec, prefetch),
                    with_payload=with_payload,
                )
                return sorted(hits, key=lambda h: (-h.score, h.id))[:limit]
            return self._query(WINDOWS, [vec], flt, limit, with_payload=with_payload)
        return self._query(DENSE, _floats(vector), flt, limit, with_payload=with_payload)

    def search_multilingual(
        self, vector: Sequence[float], flt: models.Filter | None, limit: int, with_payload: bool = True
    ) -> list[PointHit]:
        """Top-``limit`` by cosine similarity of the ``MULTILINGUAL`` vector: only chunks that have
        one (of documents not in English) are scored; [] when the collection has no such vector."""
        if not self.has_multilingual():
            return []
        return self._query(MULTILINGUAL, _floats(vector), flt, limit, with_payload=with_payload)

    def search_sparse(
        self, vector: SparseVector, flt: models.Filter | None, limit: int, with_payload: bool = True
    ) -> list[PointHit]:
        """Top-``limit`` by BM25 (sparse dot product with IDF modifier); empty query gives [].
        ``with_payload=False``: empty payloads."""
        if not vector.indices:
            return []
        return self._query(SPARSE, vector, flt, limit, with_payload=with_payload)

    def iter_payloads(self, flt: models.Filter | None = None, batch: int = 512) -> Iterable[tuple[str, dict]]:
        """``(point id, payload)`` of every point matching ``flt`` (nothing before the collection exists)."""
        if not self.exists():
            return
        offset = None
        while True:
            rows, offset = self._scroll(flt, batch, offset)
            yield from rows
            if offset is None:
                return


def _floats(v: Sequence[float]) -> list[float]:
    """A vector as a list of Python floats (numpy arrays included)."""
    tolist = getattr(v, "tolist", None)
    return [float(x) for x in (tolist() if tolist else v)]


# --------------------------------------------------------------------------- Qdrant Edge
# qdrant-edge-py 0.9.0 turns a Python bool in MatchValue into an integer, so a condition on a
# boolean payload field never matches (measured: MatchValue(False) on `live: false` points counts
# 0). The adapter stores each boolean field also as an integer 0/1 under a shadow key, matches
# on that, and strips the shadow keys from every payload it returns.
EDGE_BOOL_SHADOW = {name: f"_edge_{name}" for name in BOOL_FIELDS}


class EdgeVectorStore(VectorStore):
    """The chunk collection in Qdrant Edge (``qdrant-edge-py``, in-process, one shard per
    collection in ``<path>/<collection>``), behind the ``VectorStore`` interface.

    Filters are built as ``qdrant_client.models.Filter`` (as for the server) and translated by
    ``edge_filter``. Payload indexes: keyword, integer and the boolean shadow fields. The folder is
    guarded by a ``filelock`` lock (``<path>/<collection>.lock``), taken before Edge opens it:
    raises ``StoreInUseError`` (its message says "already accessed", as qdrant-client's local mode
    does) when another process holds it. ``optimize()`` is never called on the request path (it
    holds the GIL for the whole run: minutes at 20k points here); the shard stays in its
    appendable segments, which Edge searches exactly with the payload indexes.
    """

    backend = "edge"
    batch_queries = True  # coalesce concurrent two-stage dense queries into one query_batch (_QueryBatcher)
    upsert_batch = 64  # an Edge call holds the GIL: small batches let searches run in between
    RECOUNT_S = 0.5  # see all_searchable

    def __init__(self, collection: str, *, path: str):

        self.qe = qe
        self.collection = collection
        self.folder = Path(path)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.shard_dir = self.folder / collection
        self.meta_path = self.folder / f"{collection}.json"
        self.location = f"edge:{path}"
        self.local = True
        self._has_windows = None
        self._has_multilingual = None
        self._closed = False
        key = str((self.folder.resolve() / collection))
        with _EDGE_HANDLES_LOCK:  # one shard per folder per process, shared by this process's stores
            h = _EDGE_HANDLES.get(key)
            if h is None:
                # thread_local=False: the API opens the store in one thread and closes it in another
                h = _EdgeHandle(FileLock(str(self.folder / f"{collection}.lock"), thread_local=False))
                try:
                    h.file_lock.acquire(timeout=0)
                except Timeout:
                    raise StoreInUseError(
                        f"Storage folder {path} is already accessed by another instance of ragaudit's "
                        "embedded store (Qdrant Edge allows one process per folder)"
                    ) from None
                try:
                    if self.meta_path.exists() and self.shard_dir.exists():
                        h.meta = json.loads(self.meta_path.read_text())
                        h.shard = qe.EdgeShard.load(str(self.shard_dir))
                except BaseException:
                    h.file_lock.release()
                    raise
                _EDGE_HANDLES[key] = h
            h.refs += 1
        self._key, self._h = key, h
        self._lock = h.lock

    @property
    def shard(self):
        return self._h.shard

    @shard.setter
    def shard(self, value) -> None:
        self._h.shard = value

    @property
    def _meta(self) -> dict[str, Any]:
        return self._h.meta

    @_meta.setter
    def _meta(self, value: dict[str, Any]) -> None:
        self._h.meta = value

    def close(self) -> None:
        """Release this store; the last store of the process on the folder flushes and closes the
        shard and releases the folder lock."""
        with _EDGE_HANDLES_LOCK:
            if self._closed:
                return
            self._closed = True
            h = self._h
            h.refs -= 1
            if h.refs > 0:
                return
            _EDGE_HANDLES.pop(self._key, None)
        with h.lock:
            if h.shard is not None:
                h.shard.flush()
                h.shard.close()
                h.shard = None
            h.file_lock.release()

    def upsert(self, ids, dense, sparse, payloads, batch_size: int = 0, windows=None, multilingual=None) -> None:
        super().upsert(ids, dense, sparse, payloads, batch_size or self.upsert_batch, windows, multilingual)

    def delete_replaced(self, document_id: str, version: int, sha256: str, strategy: str) -> None:
        super().delete_replaced(document_id, version, sha256, strategy)
        self.flush()  # once per published document: the WAL is applied to the segments and truncated

    # ------------------------------------------------------------------ primitives
    def exists(self) -> bool:
        return self.shard is not None

    def _dense_size(self) -> int | None:
        return self._meta.get("dense_size")

    def _windows_in_collection(self) -> bool:
        return bool(self._meta.get("windows"))

    def _multilingual_in_collection(self) -> bool:
        return bool(self._meta.get("multilingual"))

    def _create(self, dim: int, windows: bool, multilingual: int = 0) -> None:

        qe = self.qe
        vectors = {DENSE: qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine)}
        if multilingual:
            vectors[MULTILINGUAL] = qe.EdgeVectorParams(size=multilingual, distance=qe.Distance.Cosine)
        if windows:
            vectors[WINDOWS] = qe.EdgeVectorParams(
                size=dim,
                distance=qe.Distance.Cosine,
                multivector_config=qe.MultiVectorConfig(comparator=qe.MultiVectorComparator.MaxSim),
            )
        if self.shard_dir.exists():  # a shard folder without our metadata: an interrupted create
            shutil.rmtree(self.shard_dir)
        shard = qe.EdgeShard.create(
            str(self.shard_dir),
            qe.EdgeConfig(
                vectors=vectors,
                sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
                # payload in RAM: the live/primary filter of every query reads it (Cold: 92 vs 51 ms
                # for an unscoped windows query at 10k points here)
                payload_memory=qe.Memory.Cached,
            ),
        )
        for name in KEYWORD_FIELDS:
            shard.update(qe.UpdateOperation.create_field_index(name, qe.PayloadSchemaType.Keyword))
        for name in (*INTEGER_FIELDS, *EDGE_BOOL_SHADOW.values()):
            shard.update(qe.UpdateOperation.create_field_index(name, qe.PayloadSchemaType.Integer))
        shard.flush()
        self._meta = {
            "dense_size": dim,
            "windows": windows,
            "engine": "qdrant-edge",
            **({"multilingual": multilingual} if multilingual else {}),
        }
        tmp = self.meta_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self._meta))
        tmp.replace(self.meta_path)  # the collection exists once its metadata does
        self._h.writes += 1
        self.shard = shard

    def _upsert_points(self, ids, vectors, payloads) -> None:
        qe = self.qe
        points = []
        for pid, vec, pl in zip(ids, vectors, payloads):
            v = {
                k: (qe.SparseVector(indices=list(x.indices), values=[float(y) for y in x.values]) if k == SPARSE else x)
                for k, x in vec.items()
            }
            points.append(qe.Point(pid, v, _with_shadows(pl)))
        self._h.writes += 1  # before the write: see _query
        self.shard.update(qe.UpdateOperation.upsert_points(points))

    def _delete(self, flt: models.Filter) -> None:
        self._h.writes += 1  # before the write: see _query
        self.shard.update(self.qe.UpdateOperation.delete_points_by_filter(edge_filter(flt)))

    def _set_payload(self, flt: models.Filter, payload: dict[str, Any]) -> None:
        self._h.writes += 1  # before the write: see _query
        self.shard.update(self.qe.UpdateOperation.set_payload_by_filter(edge_filter(flt), _with_shadows(payload)))

    def _count(self, flt: models.Filter | None) -> int:
        return self.shard.count(self.qe.CountRequest(exact=True, filter=edge_filter(flt)))

    def _query(
        self,
        using: str,
        query: Any,
        flt: models.Filter | None,
        limit: int,
        prefetch: tuple[str, Any, int] | None = None,
        with_payload: bool = True,
    ) -> list[PointHit]:
        """As ``VectorStore._query``. The unscoped filter (``scope_filter(Scope())``: not staged, each
        document's primary strategy) is left out of the request while the shard holds no point it
        excludes (``all_searchable``): it then selects every point, and evaluating it point by
        point is a fifth of a dense scan at 50k points (measured: 20 vs 25 ms P50). Exact: the
        count is taken at a write generation, and a query during which a write began (the
        generation moved) is run again with the filter."""
        qe = self.qe
        if using == SPARSE:
            query = qe.SparseVector(indices=list(query.indices), values=[float(y) for y in query.values])

        def run(eflt: Any) -> list[PointHit]:
            pre = None
            if prefetch is not None:
                pre = [
                    qe.Prefetch(limit=prefetch[2], query=qe.Query.Nearest(prefetch[1], using=prefetch[0]), filter=eflt)
                ]
            req = qe.QueryRequest(
                limit=limit,
                query=qe.Query.Nearest(query, using=using),
                prefetches=pre,
                filter=eflt,
                with_payload=with_payload,
            )
            # the two-stage dense query (a scan of every chunk vector) is coalesced with the ones other
            # threads send meanwhile (see _QueryBatcher); its callers order ties by id (search_dense)
            res = (
                self._h.batcher.query(self.shard, req)
                if prefetch is not None and self.batch_queries
                else self.shard.query(req)
            )
            if not with_payload:
                return [PointHit(str(p.id), float(p.score), {}) for p in res]
            return [PointHit(str(p.id), float(p.score), _without_shadows(p.payload)) for p in res]

        if flt is not None and flt == _searchable_filter():
            gen = self._h.writes
            if self.all_searchable(gen):
                hits = run(None)
                if self._h.writes == gen:
                    return hits
        return run(edge_filter(flt))

    def all_searchable(self, gen: int | None = None) -> bool:
        """True when no point of the shard is staged (``live: false``) or of a non-primary
        strategy, as counted at write generation ``gen`` (default: now). The count is cached per
        generation; while writes keep coming (an ingestion) it is retaken at most every
        ``RECOUNT_S`` seconds, and False in between."""
        h = self._h
        gen = h.writes if gen is None else gen
        if h.unsearchable_at != gen:
            now = time.monotonic()
            if now - h.counted_at < self.RECOUNT_S:
                return False
            h.counted_at = now
            n = self._count(_unsearchable_filter())
            if h.writes != gen:
                return False
            h.unsearchable, h.unsearchable_at = n, gen
        return h.unsearchable == 0

    def _scroll(self, flt, limit, offset):
        recs, nxt = self.shard.scroll(
            self.qe.ScrollRequest(
                offset=offset, limit=limit, filter=edge_filter(flt), with_payload=True, with_vector=False
            )
        )
        return [(str(r.id), _without_shadows(r.payload)) for r in recs], nxt

    def get_payloads(self, ids: list[str]) -> list[tuple[str, dict]]:
        """Payloads of the given point ids (missing ids are skipped)."""
        if not ids or not self.exists():
            return []
        recs = self.shard.retrieve(list(ids), with_payload=True, with_vector=False)
        return [(str(r.id), _without_shadows(r.payload)) for r in recs]

    def get_vectors(self, ids: list[str], names: Sequence[str] = (DENSE,)) -> dict[str, dict[str, Any]]:
        if not ids or not self.exists():
            return {}
        recs = self.shard.retrieve(list(ids), with_payload=False, with_vector=list(names))
        out = {}
        for r in recs:
            vec = r.vector if isinstance(r.vector, dict) else {}
            out[str(r.id)] = {
                k: (SparseVector(list(v.indices), list(v.values)) if k == SPARSE else v)
                for k, v in vec.items()
                if k in names
            }
        return out

    def delete_points(self, ids: list[str]) -> None:
        with self._lock:
            self._h.writes += 1
            self.shard.update(self.qe.UpdateOperation.delete_points(list(ids)))

    def flush(self) -> None:
        """Write Edge's pending changes to its segments (the WAL already makes them durable)."""
        with self._lock:
            if self.shard is not None:
                self.shard.flush()


class _EdgeHandle:
    """The open shard of one folder in this process: the file lock, the shard, its metadata, the
    write lock and how many ``EdgeVectorStore`` objects use it (qdrant-client's local mode also
    lets one process open its folder more than once; Edge must not be opened twice)."""

    def __init__(self, file_lock: Any):
        self.file_lock = file_lock
        self.shard: Any = None
        self.meta: dict[str, Any] = {}
        self.lock = threading.RLock()
        self.refs = 0
        self.writes = 0  # write generation: bumped before every write to the shard
        self.unsearchable = -1  # points the unscoped filter excludes, counted at generation unsearchable_at
        self.unsearchable_at: int | None = None
        self.counted_at = float("-inf")
        self.batcher = _QueryBatcher()


class _QuerySlot:
    __slots__ = ("request", "result", "error", "done", "event")

    def __init__(self, request: Any):
        self.request = request
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = False
        self.event = threading.Event()

    def get(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.result


class _QueryBatcher:
    """Runs the Edge queries that threads send while one is running as one ``query_batch`` call
    (group commit: the thread that finds no query running leads; the queries that arrive during
    its call wait and go together in the next call, led by the first of them).

    Why: an Edge call holds the GIL for its whole duration, and the two-stage dense query scans
    every chunk vector (~9 ms at 50k chunks here). ``query_batch`` scores queries that differ
    only in their vector in one pass over the segments: measured at 50k chunks, 9.2 ms per query
    one by one against 6.3 / 5.1 / 4.4 ms per query in batches of 2 / 4 / 8 (load ~7); under 8
    /search clients the API's Edge dense time per request fell from 7.7 to 6.1 ms of GIL
    (``bench/gil_per_request.py``). A lone query runs as a plain ``query`` call (no thread
    hand-off, nothing changes). Each query's hits and scores are those of its own ``query`` call;
    only the order among exactly equal scores may differ, which ``search_dense`` fixes (ties by
    id). A failing batch is retried query by query, so one bad request fails alone.
    ``calls`` / ``queries`` count Edge calls and the queries they carried."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: list[_QuerySlot] = []
        self._busy = False
        self.calls = 0
        self.queries = 0

    def query(self, shard: Any, request: Any) -> list[Any]:
        """``shard.query(request)``, possibly run in one ``query_batch`` with other threads' queries."""
        slot = _QuerySlot(request)
        with self._lock:
            self._pending.append(slot)
            lead = not self._busy
            self._busy = True
        if not lead:
            slot.event.wait()
            if slot.done:
                return slot.get()
        # leading: this slot is still pending; take it with every query that came meanwhile
        with self._lock:
            batch, self._pending = self._pending, []
        self._run(shard, batch)
        with self._lock:
            nxt = self._pending[0] if self._pending else None
            if nxt is None:
                self._busy = False
        if nxt is not None:
            nxt.event.set()  # it leads the next call
        for s in batch:
            if s is not slot:
                s.event.set()
        return slot.get()

    def _run(self, shard: Any, batch: list[_QuerySlot]) -> None:

        self.calls += 1
        self.queries += len(batch)
        try:
            if len(batch) == 1:
                results = [shard.query(batch[0].request)]
            else:
                results = shard.query_batch(qe.QueryBatchRequest([s.request for s in batch]))
            for s, r in zip(batch, results):
                s.result = r
        except BaseException as e:
            if len(batch) == 1:
                batch[0].error = e
            else:  # one by one: a bad request fails alone
                for s in batch:
                    try:
                        s.result = shard.query(s.request)
                    except BaseException as e1:
                        s.error = e1
        for s in batch:
            s.done = True


_EDGE_HANDLES: dict[str, _EdgeHandle] = {}
_EDGE_HANDLES_LOCK = threading.Lock()


@lru_cache(maxsize=1)
def _searchable_filter() -> models.Filter:
    """The filter of an unscoped search (``scope_filter(Scope())``)."""
    return scope_filter(Scope())


@lru_cache(maxsize=1)
def _unsearchable_filter() -> models.Filter:
    """Points an unscoped search never returns: staged, or of a non-primary strategy."""
    return models.Filter(
        should=[_live_only(), models.FieldCondition(key="primary", match=models.MatchValue(value=False))]
    )


def _with_shadows(payload: dict[str, Any]) -> dict[str, Any]:
    out = dict(payload)
    for name, shadow in EDGE_BOOL_SHADOW.items():
        if isinstance(payload.get(name), bool):
            out[shadow] = int(payload[name])
    return out


def _without_shadows(payload: dict[str, Any] | None) -> dict[str, Any]:
    if not payload:
        return {}
    return {k: v for k, v in payload.items() if not k.startswith("_edge_")}


def edge_filter(flt: Any):
    """The ``qdrant_edge.Filter`` equivalent of a ``qdrant_client.models.Filter`` (``None`` stays
    ``None``). Supports what this module builds: nested filters (must / should / must_not), field
    conditions with MatchValue, MatchAny, MatchExcept and Range; a boolean MatchValue on a boolean
    field becomes an integer match on its shadow key (see ``EDGE_BOOL_SHADOW``). ``TypeError`` for
    anything else, so an unsupported condition can never be dropped silently."""

    if flt is None:
        return None

    def cond(c: Any):
        if isinstance(c, models.Filter):
            return edge_filter(c)
        if not isinstance(c, models.FieldCondition):
            raise TypeError(f"no Qdrant Edge translation for condition {type(c).__name__}")
        if c.range is not None:
            r = c.range
            return qe.FieldCondition(key=c.key, range=qe.RangeFloat(gte=r.gte, gt=r.gt, lte=r.lte, lt=r.lt))
        m = c.match
        if isinstance(m, models.MatchValue):
            if isinstance(m.value, bool):
                if c.key not in EDGE_BOOL_SHADOW:
                    raise TypeError(f"boolean match on {c.key!r}, which has no shadow field on Qdrant Edge")
                return qe.FieldCondition(key=EDGE_BOOL_SHADOW[c.key], match=qe.MatchValue(int(m.value)))
            return qe.FieldCondition(key=c.key, match=qe.MatchValue(m.value))
        if isinstance(m, models.MatchAny):
            return qe.FieldCondition(key=c.key, match=qe.MatchAny(any=list(m.any)))
        if isinstance(m, models.MatchExcept):
            return qe.FieldCondition(key=c.key, match=qe.MatchExcept(list(m.except_)))
        raise TypeError(f"no Qdrant Edge translation for match {type(m).__name__} on {c.key!r}")

    def conds(xs: Any):
        if xs is None:
            return None
        xs = xs if isinstance(xs, list) else [xs]
        return [cond(x) for x in xs] or None

    if flt.min_should is not None:
        raise TypeError("no Qdrant Edge translation for min_should")
    return qe.Filter(must=conds(flt.must), should=conds(flt.should), must_not=conds(flt.must_not))


def copy_points(src: VectorStore, dst: VectorStore, batch: int = 256) -> int:
    """Copy every point of ``src`` (payloads, dense, window, multilingual and sparse vectors; ids kept) into
    ``dst``, creating ``dst``'s collection with ``src``'s shape; returns the number copied. Used
    once to move a local-mode store into Qdrant Edge when the default backend changed."""
    if not src.exists():
        return 0
    multi = src.has_multilingual()
    dst.ensure_collection(src._dense_size(), windows=src.has_windows(), multilingual=MULTILINGUAL_DIM if multi else 0)
    names = [DENSE, SPARSE] + ([WINDOWS] if src.has_windows() else []) + ([MULTILINGUAL] if multi else [])
    n = 0
    rows: list[tuple[str, dict]] = []

    def flush_rows() -> int:
        vecs = src.get_vectors([pid for pid, _ in rows], names)
        keep = [(pid, pl) for pid, pl in rows if pid in vecs]
        dst.upsert(
            [pid for pid, _ in keep],
            [vecs[pid][DENSE] for pid, _ in keep],
            [vecs[pid][SPARSE] for pid, _ in keep],
            [pl for _, pl in keep],
            windows=[vecs[pid][WINDOWS] for pid, _ in keep] if WINDOWS in names else None,
            multilingual=[vecs[pid].get(MULTILINGUAL) for pid, _ in keep] if multi else None,
        )
        return len(keep)

    for row in src.iter_payloads(batch=batch):
        rows.append(row)
        if len(rows) == batch:
            n += flush_rows()
            rows = []
    if rows:
        n += flush_rows()
    return n


def open_store(
    collection: str,
    *,
    backend: str = "edge",
    path: str | None = None,
    url: str | None = None,
    api_key: str | None = None,
) -> VectorStore:
    """The store for these settings: a Qdrant server when ``url`` is set (``backend`` is then
    ignored), else the embedded ``backend`` (``"edge"`` or ``"local"``) in folder ``path``.
    ``ValueError`` for an unknown backend; ``StoreInUseError`` / ``RuntimeError`` when another
    process holds the embedded folder."""
    if url:
        return VectorStore(collection, url=url, api_key=api_key)
    if backend == "edge":
        return EdgeVectorStore(collection, path=path)
    if backend == "local":
        return VectorStore(collection, path=path)
    raise ValueError(f"unknown store backend {backend!r}: use one of {', '.join(BACKENDS)}")
