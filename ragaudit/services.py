"""The process-wide objects built from ``Settings``: database, vector store, embedder.

Qdrant local mode allows one open client per storage folder per process, so every part of a
process (API, CLI, in-process Dagster runs) must share one ``Services`` per configuration.
``get_services`` is that single seam: it caches by the settings that identify the stores.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from dataclasses import dataclass, field
from functools import cached_property

from sqlalchemy.engine import Engine
from sqlalchemy.orm import sessionmaker

from ragaudit.index.embedding import (
    Embedder,
    ModelNotFoundError,
    fix_mmap_threshold,
    quiet_transformers,
    resolve_model_path,
)
from ragaudit.index.store import VectorStore, copy_points, open_store
from ragaudit.platform.db import make_engine, make_sessionmaker, migrate
from ragaudit.platform.settings import DEFAULT_EMBEDDING_BACKEND, Settings


@dataclass
class Services:
    """Lazily built shared objects. ``embedder`` loads the model on first use (~3-5 s)."""

    settings: Settings
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @cached_property
    def engine(self) -> Engine:
        engine = make_engine(self.settings.database_url)
        migrate(engine)
        return engine

    @cached_property
    def sessions(self) -> sessionmaker:
        return make_sessionmaker(self.engine)

    @cached_property
    def store(self) -> VectorStore:
        s = self.settings
        if s.qdrant_url:
            return open_store(
                s.collection,
                url=s.qdrant_url,
                api_key=s.qdrant_api_key.get_secret_value() if s.qdrant_api_key else None,
            )
        s.qdrant_path.mkdir(parents=True, exist_ok=True)
        store = open_store(s.collection, backend=s.store_backend, path=str(s.qdrant_path))
        if s.store_backend == "edge" and not store.exists():
            _import_local_mode(store, s.data_dir / "qdrant", s.collection)
        return store

    @cached_property
    def embedder(self) -> Embedder:
        mb = self.settings.embedding_mmap_threshold_mb
        if mb:  # process-wide, before the model allocates: see Settings.embedding_mmap_threshold_mb
            fix_mmap_threshold(int(mb * (1 << 20)))
        s = self.settings
        return shared_embedder(s.embedding_model, s.embedding_batch_size, s.embedding_backend, s.embedding_cache_dir)

    @cached_property
    def reranker(self):
        """The CrossEncoder of ``reranker_model`` or None when not configured.

        Raises ``ModelNotFoundError`` when the setting names no local folder."""
        if not self.settings.reranker_model:
            return None

        quiet_transformers()
        from sentence_transformers import (
            CrossEncoder,  # deferred: sentence-transformers (heavy, optional: torch backend, reranker)
        )

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        path = resolve_model_path(self.settings.reranker_model)
        if not path.is_dir():
            raise ModelNotFoundError(f"reranker model folder {path} not found")
        return CrossEncoder(str(path), device="cpu", local_files_only=True)

    def close(self) -> None:
        if "store" in self.__dict__:
            self.store.close()
            del self.__dict__["store"]
        if "engine" in self.__dict__:
            self.engine.dispose()


def _import_local_mode(store: VectorStore, folder, collection: str) -> None:
    """Copy a collection of qdrant-client local mode (the embedded store before Qdrant Edge) in
    ``folder`` into the empty Edge ``store``, once; logged. A folder held by another process is
    left alone (logged): ``ragaudit reindex`` rebuilds the points from the stored PDFs."""

    log = logging.getLogger(__name__)
    if not (folder / "collection" / collection).is_dir():
        return
    try:
        src = VectorStore(collection, path=str(folder))
    except RuntimeError as e:
        log.warning("local-mode store %s not imported into Qdrant Edge: %s", folder, e)
        return
    try:
        n = copy_points(src, store)
        store.flush()
        log.warning(
            "imported %d points of local-mode store %s into Qdrant Edge (%s); the old folder can be deleted",
            n,
            folder,
            store.location,
        )
    finally:
        src.close()


_REGISTRY: dict[str, Services] = {}
_EMBEDDERS: dict[tuple, Embedder] = {}
_REGISTRY_LOCK = threading.Lock()


def _key(settings: Settings) -> tuple:
    return (
        str(settings.data_dir),
        settings.database_url,
        settings.qdrant_url,
        settings.collection,
        settings.embedding_model,
        settings.embedding_backend,
        settings.store_backend,
    )


def shared_embedder(
    model: str, batch_size: int = 32, backend: str = DEFAULT_EMBEDDING_BACKEND, cache_dir=None
) -> Embedder:
    """One loaded model per (model, batch size, backend) per process: weights are read-only and
    thread-safe. ``cache_dir`` (where the onnx backend keeps its export) is not part of the key:
    the export of the same weights is the same file wherever it is kept."""
    key = (model, batch_size, backend)
    with _REGISTRY_LOCK:
        emb = _EMBEDDERS.get(key)
        if emb is None:
            emb = _EMBEDDERS[key] = Embedder(model, batch_size, backend, cache_dir)
        return emb


def services_key(settings: Settings) -> str:
    """An opaque id of the configuration (a hash: carries no secret), for in-process Dagster runs."""
    return hashlib.sha256(repr(_key(settings)).encode()).hexdigest()[:16]


def get_services(settings: Settings) -> Services:
    """The shared ``Services`` for this configuration (created on first call)."""
    with _REGISTRY_LOCK:
        k = services_key(settings)
        svc = _REGISTRY.get(k)
        if svc is None:
            svc = _REGISTRY[k] = Services(settings)
        return svc


def services_by_key(key: str) -> Services:
    """The ``Services`` registered under ``key``; ``KeyError`` if this process has none."""
    with _REGISTRY_LOCK:
        return _REGISTRY[key]


def release_services(settings: Settings) -> None:
    """Close and forget the shared services of this configuration (frees the local Qdrant lock)."""
    with _REGISTRY_LOCK:
        svc = _REGISTRY.pop(services_key(settings), None)
    if svc is not None:
        svc.close()
