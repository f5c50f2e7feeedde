"""Qdrant vector store: one point per chunk, a named dense vector and a named sparse BM25 vector.

Local mode (a folder, single process) by default; a Qdrant server when ``qdrant_url`` is set.
Both go through the same ``QdrantClient`` API, so the code path is the same.
"""

from __future__ import annotations

import logging
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from qdrant_client import QdrantClient, models

from .sparse import SparseVector

log = logging.getLogger(__name__)

DENSE = "dense"
WINDOWS = "dense_windows"
SPARSE = "bm25"
POINT_NAMESPACE = uuid.UUID("8f0d3c2e-5b7a-4a51-9a3c-5f1e7c1d2b64")
KEYWORD_FIELDS = ("document_id", "doc_name", "doc_key", "knowledge_base", "strategy", "doc_sha256")
INTEGER_FIELDS = ("page_start", "page_end", "chunk_index", "ingest_version")
BOOL_FIELDS = ("primary", "live")


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


@dataclass
class Scope:
    """Restricts retrieval; all set fields must match (AND), values inside one field are OR.

    ``page_min``/``page_max`` are inclusive 1-based page bounds on the chunk's page span.
    ``strategy`` selects chunks of one chunking strategy; unset, each document's primary
    strategy (the one it was last ingested with) is searched.
    """

    doc_names: list[str] = field(default_factory=list)
    knowledge_base: str | None = None
    document_ids: list[str] = field(default_factory=list)
    strategy: str | None = None
    page_min: int | None = None
    page_max: int | None = None

    def to_filter(self) -> models.Filter | None:
        from .names import name_key

        must: list[Any] = []
        if self.doc_names:  # matched on the NFC key; points written before the key existed by their name
            keys = sorted({name_key(n) for n in self.doc_names})
            must.append(models.Filter(should=[
                models.FieldCondition(key="doc_key", match=models.MatchAny(any=keys)),
                models.FieldCondition(key="doc_name", match=models.MatchAny(any=sorted(set(self.doc_names) | set(keys)))),
            ]))
        if self.knowledge_base:
            must.append(models.FieldCondition(key="knowledge_base", match=models.MatchValue(value=self.knowledge_base)))
        if self.document_ids:
            must.append(models.FieldCondition(key="document_id", match=models.MatchAny(any=list(self.document_ids))))
        must_not: list[Any] = [_live_only()]
        if self.strategy:
            must.append(models.FieldCondition(key="strategy", match=models.MatchValue(value=self.strategy)))
        else:  # each document's primary strategy only (others coexist for comparison)
            must_not.append(models.FieldCondition(key="primary", match=models.MatchValue(value=False)))
        if self.page_min is not None:
            must.append(models.FieldCondition(key="page_end", range=models.Range(gte=self.page_min)))
        if self.page_max is not None:
            must.append(models.FieldCondition(key="page_start", range=models.Range(lte=self.page_max)))
        return models.Filter(must=must or None, must_not=must_not)

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v not in (None, [], "")}


@dataclass
class PointHit:
    id: str
    score: float
    payload: dict[str, Any]


class VectorStore:
    """Thin, typed wrapper over ``QdrantClient`` for the chunk collection.

    Raises ``qdrant_client`` exceptions (connection errors, ``RuntimeError`` when a local
    store folder is already opened by another process).
    """

    def __init__(self, collection: str, *, path: str | None = None, url: str | None = None,
                 api_key: str | None = None):
        if url:
            self.client = QdrantClient(url=url, api_key=api_key, timeout=30)
            self.location = url
        else:
            self.client = QdrantClient(path=path)
            self.location = f"local:{path}"
        self.local = not url
        self.collection = collection
        self._lock = threading.RLock()
        self._has_windows: bool | None = None

    def close(self) -> None:
        self.client.close()

    def ensure_collection(self, dim: int) -> None:
        """Create the collection (cosine dense ``dim``, sparse BM25 with IDF) and payload indexes."""
        with self._lock:
            if self.client.collection_exists(self.collection):
                info = self.client.get_collection(self.collection)
                vectors = info.config.params.vectors
                have = vectors[DENSE].size if isinstance(vectors, dict) and DENSE in vectors else None
                if have != dim:
                    raise ValueError(
                        f"collection {self.collection!r} has dense size {have}, the embedding model gives {dim}: "
                        "use another collection name or re-ingest into a new one"
                    )
                return
            self.client.create_collection(
                self.collection,
                vectors_config={
                    DENSE: models.VectorParams(size=dim, distance=models.Distance.COSINE),
                    WINDOWS: models.VectorParams(size=dim, distance=models.Distance.COSINE,
                                                 multivector_config=models.MultiVectorConfig(
                                                     comparator=models.MultiVectorComparator.MAX_SIM)),
                },
                sparse_vectors_config={SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)},
            )
            if not self.local:  # local mode ignores payload indexes (and warns): create them on servers
                for name in KEYWORD_FIELDS:
                    self.client.create_payload_index(self.collection, name, models.PayloadSchemaType.KEYWORD)
                for name in INTEGER_FIELDS:
                    self.client.create_payload_index(self.collection, name, models.PayloadSchemaType.INTEGER)
                for name in BOOL_FIELDS:
                    self.client.create_payload_index(self.collection, name, models.PayloadSchemaType.BOOL)

    def has_windows(self) -> bool:
        """True when the collection has the window multivector (collections created before it
        existed have only one dense vector per chunk)."""
        if self._has_windows is None:
            if not self.exists():
                return False
            vectors = self.client.get_collection(self.collection).config.params.vectors
            self._has_windows = isinstance(vectors, dict) and WINDOWS in vectors
        return self._has_windows

    def upsert(self, ids: Sequence[str], dense: Sequence[Sequence[float]], sparse: Sequence[SparseVector],
               payloads: Sequence[dict[str, Any]], batch_size: int = 256,
               windows: Sequence[Sequence[Sequence[float]]] | None = None) -> None:
        """Upsert points in batches (idempotent: same ids overwrite). ``windows``: per point, the
        vectors of its sentence windows (stored when the collection has the multivector)."""
        with_windows = windows is not None and self.has_windows()
        with self._lock:
            for i in range(0, len(ids), batch_size):
                points = []
                for j in range(i, min(i + batch_size, len(ids))):
                    vector: dict[str, Any] = {
                        DENSE: list(map(float, dense[j])),
                        SPARSE: models.SparseVector(indices=sparse[j].indices, values=sparse[j].values),
                    }
                    if with_windows:
                        vector[WINDOWS] = [list(map(float, v)) for v in windows[j]]
                    points.append(models.PointStruct(id=ids[j], vector=vector, payload=payloads[j]))
                self.client.upsert(self.collection, points=points, wait=True)

    def _doc_filter(self, document_id: str, keep_sha256: str | None = None, only_sha256: str | None = None,
                    strategy: str | None = None, version: int | None = None,
                    live: bool | None = None) -> models.Filter:
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

    def delete_document(self, document_id: str, *, keep_sha256: str | None = None,
                        only_sha256: str | None = None, strategy: str | None = None,
                        version: int | None = None, live: bool | None = None) -> None:
        """Delete a document's points (only that document's: every filter includes its id);
        ``keep_sha256`` spares one content version, ``only_sha256`` / ``version`` / ``strategy`` /
        ``live`` narrow the selection."""
        if not self.exists():
            return
        with self._lock:
            self.client.delete(
                self.collection,
                points_selector=models.FilterSelector(
                    filter=self._doc_filter(document_id, keep_sha256, only_sha256, strategy, version, live)
                ),
                wait=True,
            )

    def set_live(self, document_id: str, version: int, live: bool) -> None:
        """Turn the points of one ingest version of a document searchable (``live``) or back."""
        flt = models.Filter(must=[
            models.FieldCondition(key="document_id", match=models.MatchValue(value=document_id)),
            models.FieldCondition(key="ingest_version", match=models.MatchValue(value=version))])
        with self._lock:
            self.client.set_payload(self.collection, payload={"live": live}, points=flt, wait=True)

    def delete_replaced(self, document_id: str, version: int, sha256: str, strategy: str) -> None:
        """After ``version`` is published: delete the document's points of other content versions
        (all strategies) and of ``strategy`` at other ingest versions, then make ``strategy`` primary.
        Points of other documents are never selected (the filter includes the document id)."""
        doc = models.FieldCondition(key="document_id", match=models.MatchValue(value=document_id))
        this = models.FieldCondition(key="ingest_version", match=models.MatchValue(value=version))
        same_sha = models.FieldCondition(key="doc_sha256", match=models.MatchValue(value=sha256))
        same_strategy = models.FieldCondition(key="strategy", match=models.MatchValue(value=strategy))
        replaced = models.Filter(must=[doc], must_not=[this],
                                 should=[models.Filter(must_not=[same_sha]), same_strategy])
        with self._lock:
            self.client.delete(self.collection, points_selector=models.FilterSelector(filter=replaced), wait=True)
        self.set_primary(document_id, strategy)

    def set_primary(self, document_id: str, strategy: str) -> None:
        """Mark ``strategy`` as the document's primary chunking (searched by default)."""
        doc = models.FieldCondition(key="document_id", match=models.MatchValue(value=document_id))
        same = models.FieldCondition(key="strategy", match=models.MatchValue(value=strategy))
        with self._lock:
            self.client.set_payload(self.collection, payload={"primary": False},
                                    points=models.Filter(must=[doc], must_not=[same]), wait=True)
            self.client.set_payload(self.collection, payload={"primary": True},
                                    points=models.Filter(must=[doc, same]), wait=True)

    def exists(self) -> bool:
        return self.client.collection_exists(self.collection)

    def count(self, document_id: str | None = None, *, sha256: str | None = None, strategy: str | None = None,
              version: int | None = None, live: bool | None = None) -> int:
        """Exact number of points, optionally of one document (and content version / strategy /
        ingest version / live state)."""
        if not self.exists():
            return 0
        flt = self._doc_filter(document_id, only_sha256=sha256, strategy=strategy, version=version,
                               live=live) if document_id else None
        return self.client.count(self.collection, count_filter=flt, exact=True).count

    def search_dense(self, vector: Sequence[float], flt: models.Filter | None, limit: int,
                     windows: bool = False) -> list[PointHit]:
        """Top-``limit`` by cosine similarity of the dense vector; with ``windows`` (and a collection
        that has them), by MaxSim: the cosine of the chunk's best sentence window."""
        if windows and self.has_windows():
            res = self.client.query_points(self.collection, query=[list(map(float, vector))], using=WINDOWS,
                                           query_filter=flt, limit=limit, with_payload=True)
        else:
            res = self.client.query_points(self.collection, query=list(map(float, vector)), using=DENSE,
                                           query_filter=flt, limit=limit, with_payload=True)
        return [PointHit(str(p.id), float(p.score), p.payload or {}) for p in res.points]

    def search_sparse(self, vector: SparseVector, flt: models.Filter | None, limit: int) -> list[PointHit]:
        """Top-``limit`` by BM25 (sparse dot product with IDF modifier); empty query gives []."""
        if not vector.indices:
            return []
        res = self.client.query_points(
            self.collection,
            query=models.SparseVector(indices=vector.indices, values=vector.values),
            using=SPARSE, query_filter=flt, limit=limit, with_payload=True,
        )
        return [PointHit(str(p.id), float(p.score), p.payload or {}) for p in res.points]

    def get_payloads(self, ids: list[str]) -> list[tuple[str, dict]]:
        """Payloads of the given point ids (missing ids are skipped)."""
        if not ids or not self.exists():
            return []
        pts = self.client.retrieve(self.collection, ids=ids, with_payload=True, with_vectors=False)
        return [(str(p.id), p.payload or {}) for p in pts]

    def iter_payloads(self, flt: models.Filter | None = None, batch: int = 512) -> Iterable[tuple[str, dict]]:
        """``(point id, payload)`` of every point matching ``flt`` (nothing before the collection exists)."""
        if not self.exists():
            return
        offset = None
        while True:
            pts, offset = self.client.scroll(self.collection, scroll_filter=flt, limit=batch, offset=offset,
                                             with_payload=True, with_vectors=False)
            for p in pts:
                yield str(p.id), p.payload or {}
            if offset is None:
                return
