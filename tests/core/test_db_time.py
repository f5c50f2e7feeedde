"""Timestamps read back the same way from SQLite (embedded mode) and PostgreSQL (production)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import select

from ragaudit.platform.db import Document, make_engine, make_sessionmaker, migrate, new_id


def _roundtrip(url: str) -> tuple[datetime, datetime, int]:
    engine = make_engine(url)
    try:
        migrate(engine)
        sessions = make_sessionmaker(engine)
        paris = timezone(timedelta(hours=1))
        doc = Document(
            id=new_id(),
            doc_name="t.pdf",
            name_key="t.pdf",
            sha256="0" * 64,
            ingested_at=datetime(2026, 11, 30, 11, 0, tzinfo=paris),
        )
        with sessions.begin() as s:
            s.add(doc)
        with sessions() as s:
            row = s.get(Document, doc.id)
            # a filter with an aware bound selects by the instant, not by the wall-clock text
            n = len(
                s.scalars(
                    select(Document).where(Document.ingested_at >= datetime(2026, 11, 30, 10, 0, tzinfo=timezone.utc))
                ).all()
            )
            return row.created_at, row.ingested_at, n
    finally:
        engine.dispose()


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.integration)])
def test_timestamps_are_utc_aware_on_every_backend(backend, tmp_path, request):
    """``created_at`` (set by the default) and ``ingested_at`` (set at +01:00) read back as aware
    UTC datetimes, 10:00 UTC for 11:00+01:00, and an aware filter bound matches that instant.
    Fails if the columns go back to plain ``DateTime(timezone=True)``: SQLite returns naive values
    (the API then printed times without a zone in the embedded mode only) and stores 11:00+01:00
    as the text 11:00, one hour off."""
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 't.db'}"
    else:
        from tests.test_document_identity import fresh_pg_database

        url = fresh_pg_database(request.getfixturevalue("pg_url"))
    created, ingested, n = _roundtrip(url)
    assert created.tzinfo is not None and created.utcoffset() == timedelta(0)
    assert abs(datetime.now(timezone.utc) - created) < timedelta(minutes=5)
    assert ingested == datetime(2026, 11, 30, 10, 0, tzinfo=timezone.utc)
    assert ingested.utcoffset() == timedelta(0)
    assert n == 1
