"""The react-admin bridge: a Starlette app mounted at ``/admin/api`` that speaks the
ra-data-simple-rest protocol (https://github.com/marmelab/react-admin/tree/master/packages/ra-data-simple-rest),
as that data provider's code sends it (the protocol below; the routes are listed in docs/http-api.md):

=================  =====================================================  ======================================
ra method          request                                                response
=================  =====================================================  ======================================
getList            ``GET /r?sort=["f","ASC"]&range=[0,24]&filter={..}``   200 array + ``Content-Range: r 0-24/N``
getOne             ``GET /r/{id}``                                        200 record
getMany            ``GET /r?filter={"id":[..]}``                          200 array
getManyReference   getList with ``{"<target>": id}`` in ``filter``        as getList
create             ``POST /r`` (JSON)                                     201 record with ``id``
update(Many)       ``PUT /r/{id}`` (JSON), one request per id             200 record
delete(Many)       ``DELETE /r/{id}``, one request per id                 200 the deleted record
=================  =====================================================  ======================================

Filters: ``q`` is a case-insensitive substring search over the resource's text fields; a list
value means "one of" (``IN``); ``<field>_gte`` / ``<field>_lte`` bound a numeric or time field
(inclusive). Times are ISO 8601 dates or date-times (``2024-05-01``, ``2024-05-01T10:00:00Z``,
``...+02:00``; no offset = UTC); a date alone as ``_lte`` covers that whole day.
Only the fields listed per resource may be sorted or filtered on: anything else, a malformed
JSON value or a bad range is a 400 whose ``message`` names the parameter or field. Every value
reaches SQL as a bound parameter (SQLAlchemy expressions; no string is ever spliced into SQL).
Errors are ``{"message": ...}`` (what react-admin's ``fetchJson`` shows). Writes to read-only
resources get 405. Access follows the API's key rules (``ragaudit.api.deps.key_required``): when
``RAGAUDIT_API_KEYS`` is set, writes always need a key (re-ingestion can call the LLM for gold Q&A),
``query_logs`` (users' questions) unless ``RAGAUDIT_FILES_AND_QUERY_LOGS_OPEN`` is true with reads
open, other reads only when ``RAGAUDIT_READ_REQUIRES_API_KEY`` is true.

Resources: ``documents`` (list/show; delete removes the document like ``DELETE /documents/{id}``;
update with ``{"strategy": S}`` re-ingests the stored file with chunking strategy S), ``chunks``
(read-only), ``qa_pairs`` (the gold set: create/update/delete; the evidence must occur verbatim,
whitespace-normalised, in the pair's chunk, else 400), ``datasets``, ``query_logs`` and
``eval_runs`` (read-only).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from typing import Any, Callable

from sqlalchemy import Integer, func, or_, select
from sqlalchemy.exc import SQLAlchemyError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ragaudit.answer.citations import find_quote
from ragaudit.evaluate.goldrules import answer_type_of
from ragaudit.evaluate.runs import summarize
from ragaudit.ingest import documents as ingest
from ragaudit.pipelines.runner import DagsterRunner, remove_partition
from ragaudit.platform.db import ChunkRow, Document, EvalDataset, EvalRun, QAPair, QueryLog, new_id

from .deps import key_is_valid, key_required, presented_key


class BridgeError(Exception):
    """A client error: ``status`` and a message returned as ``{"message": ...}``."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


@dataclass
class Resource:
    """One ra-data-simple-rest resource over an ORM model.

    ``fields``: columns returned (all plain columns when empty); ``sortable``/``filterable``: the
    whitelists; ``text``: columns ``q`` searches; ``ranged``: columns accepting ``_gte``/``_lte``;
    ``writable``: which of create/update/delete are allowed; ``extra``: fields added to each record;
    ``private``: reading it needs a key like stored files and query logs (``key_required``)."""

    name: str
    model: Any
    sortable: tuple[str, ...]
    filterable: tuple[str, ...]
    text: tuple[str, ...] = ()
    ranged: tuple[str, ...] = ()
    writable: frozenset[str] = frozenset()
    default_sort: tuple[str, str] = ("id", "ASC")
    exclude: tuple[str, ...] = ()
    extra: Callable[[Any, Any], dict[str, Any]] | None = None
    private: bool = False
    columns: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.columns = {c.key: getattr(self.model, c.key) for c in self.model.__mapper__.column_attrs}

    def record(self, row: Any, session: Any) -> dict[str, Any]:
        out = {}
        for k in self.columns:
            if k in self.exclude:
                continue
            v = getattr(row, k)
            out[k] = v.isoformat() if isinstance(v, datetime) else v
        if self.extra is not None:
            out.update(self.extra(row, session))
        return out


def _run_extra(row: EvalRun, _s: Any) -> dict[str, Any]:
    res = row.results or {}
    return {
        "progress": {"done": row.progress_done, "total": row.progress_total},
        "modes": res.get("modes"),
        "answers_summary": {
            m: {k: v for k, v in a.items() if k != "labels"} for m, a in (res.get("answers") or {}).items()
        },
        "n_questions": (res.get("dataset") or {}).get("n_questions"),
        # which questions the retrieval metrics (each mode's n) average over, in words
        "question_split": summarize(res)["question_split"] if res else None,
    }


RESOURCES: dict[str, Resource] = {
    r.name: r
    for r in [
        Resource(
            "documents",
            Document,
            sortable=(
                "id",
                "doc_name",
                "knowledge_base",
                "status",
                "pages",
                "chunk_count",
                "strategy",
                "ingest_version",
                "size_bytes",
                "created_at",
                "ingested_at",
            ),
            filterable=("id", "doc_name", "knowledge_base", "status", "strategy", "extractor"),
            text=("doc_name", "title"),
            ranged=("pages", "chunk_count", "created_at"),
            writable=frozenset({"update", "delete"}),
            default_sort=("created_at", "DESC"),
        ),
        Resource(
            "chunks",
            ChunkRow,
            sortable=("id", "document_id", "index", "strategy", "page_start", "page_end", "token_count"),
            filterable=("id", "document_id", "strategy", "page_start", "page_end", "section"),
            text=("text", "section"),
            ranged=("page_start", "page_end", "index", "token_count"),
            default_sort=("index", "ASC"),
        ),
        Resource(
            "qa_pairs",
            QAPair,
            sortable=(
                "id",
                "document_id",
                "chunk_id",
                "page",
                "question",
                "generator",
                "kind",
                "answer_type",
                "paraphrase",
                "created_at",
            ),
            filterable=(
                "id",
                "document_id",
                "chunk_id",
                "page",
                "generator",
                "model",
                "kind",
                "answer_type",
                "paraphrase",
            ),
            text=("question", "answer", "evidence"),
            ranged=("page", "created_at"),
            writable=frozenset({"create", "update", "delete"}),
            default_sort=("created_at", "DESC"),
        ),
        Resource(
            "datasets",
            EvalDataset,
            sortable=("id", "name", "source", "n_questions", "created_at"),
            filterable=("id", "name", "source"),
            text=("name",),
            ranged=("n_questions", "created_at"),
            default_sort=("created_at", "DESC"),
        ),
        Resource(
            "query_logs",
            QueryLog,
            sortable=(
                "id",
                "created_at",
                "endpoint",
                "mode",
                "top_k",
                "model",
                "label",
                "cache_hit",
                "total_ms",
                "cost_usd",
                "error_kind",
            ),
            filterable=("id", "endpoint", "mode", "model", "label", "cache_hit", "error_kind", "strategy"),
            text=("question",),
            ranged=("created_at", "total_ms", "cost_usd", "top_k"),
            default_sort=("created_at", "DESC"),
            private=True,  # users' questions
        ),
        Resource(
            "eval_runs",
            EvalRun,
            sortable=("id", "dataset", "status", "created_at", "finished_at"),
            filterable=("id", "dataset", "status"),
            text=("dataset",),
            ranged=("created_at",),
            default_sort=("created_at", "DESC"),
            exclude=("results",),
            extra=_run_extra,
        ),
    ]
}

MAX_PAGE = 1000  # rows per getList request
MAX_INT = 2**53  # larger integers are refused (SQLite and PostgreSQL bind at most 64-bit integers)


def _json_param(request: Request, name: str, default: Any) -> Any:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        return json.loads(raw)
    except ValueError:
        raise BridgeError(400, f"{name}: malformed JSON") from None


def _python_type(col: Any) -> type:
    """The Python type of a column's values; a ``TypeDecorator`` (``UTCDateTime``) answers ``object``
    itself, so its underlying type's is taken. ``NotImplementedError`` for JSON columns."""
    t = col.type
    return getattr(t, "impl_instance", t).python_type


def _time(value: Any, fname: str, upper: bool = False) -> datetime:
    """An ISO 8601 date or date-time string as an aware UTC datetime (no offset = UTC). A date alone
    is its midnight, or with ``upper`` the last instant of that day (an inclusive bound on a date
    covers the day). 400 naming the field and the value otherwise."""
    bad = BridgeError(
        400,
        f"filter: {fname!r} must be an ISO 8601 date or date-time (e.g. 2024-05-01 or "
        f"2024-05-01T10:00:00Z), not {value!r}",
    )
    if not isinstance(value, str):
        raise bad
    try:
        if len(value.strip()) == 10:  # YYYY-MM-DD
            d = date.fromisoformat(value.strip())
            dt = datetime(d.year, d.month, d.day)
            if upper:
                dt += timedelta(days=1, microseconds=-1)
        else:
            dt = datetime.fromisoformat(value.strip())
    except ValueError:
        raise bad from None
    return dt.replace(tzinfo=timezone.utc) if dt.tzinfo is None else dt.astimezone(timezone.utc)


def _coerce(col: Any, value: Any, fname: str, upper: bool = False) -> Any:
    """Check a filter value against the column's Python type (so a bad value is a 400, not a DB error).
    ``upper``: the value is an inclusive upper bound (a date alone then covers its whole day)."""
    if value is None:
        return None
    try:
        py = _python_type(col)
    except NotImplementedError:  # JSON columns
        raise BridgeError(400, f"filter: field {fname!r} cannot be filtered") from None
    if isinstance(value, (dict, list)):
        raise BridgeError(400, f"filter: {fname!r} must be a scalar value")
    if py is bool:
        if isinstance(value, bool):
            return value
        raise BridgeError(400, f"filter: {fname!r} must be true or false")
    if py in (int, float):
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise BridgeError(400, f"filter: {fname!r} must be a number")
        try:
            out = py(value)
        except (ValueError, OverflowError):
            raise BridgeError(400, f"filter: {fname!r} must be a number") from None
        if not -MAX_INT <= out <= MAX_INT:  # also NaN and infinities
            raise BridgeError(400, f"filter: {fname!r} is out of range")
        return out
    if py is datetime:
        return _time(value, fname, upper)
    return _text(value, fname)


def _text(value: Any, fname: str) -> str:
    s = str(value)
    if "\x00" in s:  # PostgreSQL refuses NUL in text: a client error, not a database failure
        raise BridgeError(400, f"filter: {fname!r} contains a NUL character")
    return s


def _where(res: Resource, flt: Any) -> list[Any]:
    """SQLAlchemy conditions for a ra filter object (bound parameters only)."""
    if not isinstance(flt, dict):
        raise BridgeError(400, "filter: must be a JSON object")
    conds = []
    for key, value in flt.items():
        if key == "q":
            if value in (None, ""):
                continue
            if not isinstance(value, str):
                raise BridgeError(400, "filter: 'q' must be a string")
            value = _text(value, "q")
            pat = "%" + value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            conds.append(or_(*[res.columns[c].ilike(pat, escape="\\") for c in res.text]))
            continue
        op = None
        fname = key
        for suffix in ("_gte", "_lte"):
            if key.endswith(suffix) and key[: -len(suffix)] in res.ranged:
                fname, op = key[: -len(suffix)], suffix
        if op is None and fname not in res.filterable:
            raise BridgeError(
                400,
                f"filter: field {key!r} is not filterable on {res.name} (filterable: {', '.join(res.filterable)}, q)",
            )
        col = res.columns[fname]
        if op == "_gte":
            conds.append(col >= _coerce(col, value, key))
        elif op == "_lte":
            conds.append(col <= _coerce(col, value, key, upper=True))
        elif isinstance(value, list):
            if len(value) > MAX_PAGE:
                raise BridgeError(400, f"filter: at most {MAX_PAGE} values for {key!r}")
            conds.append(col.in_([_coerce(col, v, key) for v in value]))
        elif value is None:
            conds.append(col.is_(None))
        else:
            conds.append(col == _coerce(col, value, key))
    return conds


def _order(res: Resource, sort: Any) -> list[Any]:
    if sort is None:
        sort = list(res.default_sort)
    if not isinstance(sort, list) or len(sort) != 2 or not all(isinstance(x, str) for x in sort):
        raise BridgeError(400, 'sort: expected ["field", "ASC"|"DESC"]')
    fname, direction = sort
    if fname not in res.sortable:
        raise BridgeError(
            400, f"sort: field {fname!r} is not sortable on {res.name} (sortable: {', '.join(res.sortable)})"
        )
    if direction.upper() not in ("ASC", "DESC"):
        raise BridgeError(400, f"sort: order must be ASC or DESC, not {direction!r}")
    col = res.columns[fname]
    primary = col.asc() if direction.upper() == "ASC" else col.desc()
    return [primary, res.columns["id"].asc()]  # stable pages


def _range(raw: Any) -> tuple[int, int]:
    if raw is None:
        return 0, 24
    if (
        not isinstance(raw, list)
        or len(raw) != 2
        or not all(isinstance(x, int) and not isinstance(x, bool) for x in raw)
    ):
        raise BridgeError(400, "range: expected [start, end] integers")
    start, end = raw
    if start < 0 or end < start or end > MAX_INT:
        raise BridgeError(400, "range: need 0 <= start <= end <= 2^53")
    if end - start + 1 > MAX_PAGE:
        raise BridgeError(400, f"range: at most {MAX_PAGE} rows per request")
    return start, end


class Bridge:
    """Request handlers; ``services()`` returns the API's ``Services`` (created by its lifespan)."""

    def __init__(self, services: Callable[[], Any], settings: Callable[[], Any]):
        self.services, self.settings = services, settings

    # --- access -------------------------------------------------------------------------------
    def _check_key(self, request: Request, write: bool) -> None:
        """401 unless the request may go on without a key (an unknown resource is checked as a read,
        then answered 404)."""
        s = self.settings()
        res = RESOURCES.get(request.path_params["resource"])
        level = "write" if write else "private" if res is not None and res.private else "read"
        if key_required(s, level) and not key_is_valid(presented_key(request), s):
            raise BridgeError(401, "missing or invalid API key (send X-API-Key or Authorization: Bearer)")

    def _resource(self, request: Request) -> Resource:
        name = request.path_params["resource"]
        res = RESOURCES.get(name)
        if res is None:
            raise BridgeError(404, f"unknown resource {name!r} (resources: {', '.join(RESOURCES)})")
        return res

    def _writable(self, res: Resource, op: str) -> None:
        if op not in res.writable:
            raise BridgeError(405, f"{res.name} is read-only for {op}" if res.writable else f"{res.name} is read-only")

    # --- reads --------------------------------------------------------------------------------
    def list(self, request: Request) -> JSONResponse:
        res = self._resource(request)
        sort = _json_param(request, "sort", None)
        start, end = _range(_json_param(request, "range", None))
        conds = _where(res, _json_param(request, "filter", {}))
        order = _order(res, sort)
        with self.services().sessions() as s:
            total = s.scalar(select(func.count()).select_from(res.model).where(*conds))
            rows = s.scalars(
                select(res.model).where(*conds).order_by(*order).offset(start).limit(end - start + 1)
            ).all()
            body = [res.record(r, s) for r in rows]
        last = start + len(body) - 1 if body else start
        return JSONResponse(body, headers={"Content-Range": f"{res.name} {start}-{last}/{total}"})

    def _get(self, s: Any, res: Resource, rid: str) -> Any:
        key: Any = rid
        if isinstance(res.columns["id"].type, Integer):
            try:
                key = int(rid)
            except ValueError:
                raise BridgeError(404, f"{res.name} {rid} not found") from None
        row = s.get(res.model, key)
        if row is None:
            raise BridgeError(404, f"{res.name} {rid} not found")
        return row

    def one(self, request: Request) -> JSONResponse:
        res = self._resource(request)
        with self.services().sessions() as s:
            row = self._get(s, res, request.path_params["id"])
            rec = res.record(row, s)
            if res.name == "eval_runs":
                rec["results"] = row.results
        return JSONResponse(rec)

    # --- writes -------------------------------------------------------------------------------
    async def _body(self, request: Request) -> dict[str, Any]:
        try:
            data = json.loads(await request.body() or b"{}")
        except ValueError:
            raise BridgeError(400, "body: malformed JSON") from None
        if not isinstance(data, dict):
            raise BridgeError(400, "body: must be a JSON object")
        return data

    @staticmethod
    def _check_pair(s: Any, data: dict[str, Any]) -> ChunkRow:
        for k in ("question", "answer", "evidence", "chunk_id"):
            if not isinstance(data.get(k), str) or not data[k].strip():
                raise BridgeError(400, f"{k}: required, a non-empty string")
        chunk = s.get(ChunkRow, data["chunk_id"])
        if chunk is None:
            raise BridgeError(400, f"chunk_id: chunk {data['chunk_id']!r} not found")
        if find_quote(data["evidence"], chunk.text) < 0:
            raise BridgeError(
                400,
                "evidence: not found verbatim in chunk "
                f"{chunk.id} (pages {chunk.page_start}-{chunk.page_end}); "
                "quote the chunk's text exactly (whitespace may differ)",
            )
        return chunk

    PAIR_FIELDS = ("question", "answer", "evidence", "chunk_id")

    async def create(self, request: Request) -> JSONResponse:
        res = self._resource(request)
        self._writable(res, "create")
        data = await self._body(request)
        unknown = sorted(set(data) - set(res.columns))  # derived fields (document_id, page, ...) are ignored
        if unknown:
            raise BridgeError(400, f"body: unknown field {unknown[0]!r}")
        if data.get("kind") not in (None, "", "manual"):
            # a pair written here is of kind "manual"; another kind given would be stored as that silently
            raise BridgeError(400, f"kind: a pair written here is of kind 'manual', not {data['kind']!r}")

        def work() -> dict[str, Any]:
            with self.services().sessions.begin() as s:
                chunk = self._check_pair(s, data)
                pair = QAPair(
                    id=new_id(),
                    document_id=chunk.document_id,
                    chunk_id=chunk.id,
                    page=chunk.page_start,
                    question=data["question"].strip(),
                    answer=data["answer"].strip(),
                    evidence=data["evidence"].strip(),
                    generator="manual",
                    model=None,
                    kind="manual",
                    answer_type=answer_type_of(data["answer"].strip()),
                )
                s.add(pair)
                s.flush()
                return res.record(pair, s)

        return JSONResponse(await run_in_threadpool(work), status_code=201)

    async def update(self, request: Request) -> JSONResponse:
        res = self._resource(request)
        self._writable(res, "update")
        data = await self._body(request)
        rid = request.path_params["id"]
        if res.name == "documents":
            return await self._reingest(rid, data)

        def work() -> dict[str, Any]:
            with self.services().sessions.begin() as s:
                pair = self._get(s, res, rid)
                merged = {k: data.get(k, getattr(pair, k)) for k in self.PAIR_FIELDS}
                chunk = self._check_pair(s, merged)
                pair.question, pair.answer = merged["question"].strip(), merged["answer"].strip()
                pair.evidence, pair.chunk_id = merged["evidence"].strip(), chunk.id
                pair.document_id, pair.page = chunk.document_id, chunk.page_start
                if pair.generator != "manual" and "(edited)" not in pair.generator:
                    pair.generator = (pair.generator + " (edited)")[:32]
                s.flush()
                return res.record(pair, s)

        return JSONResponse(await run_in_threadpool(work))

    async def _reingest(self, rid: str, data: dict[str, Any]) -> JSONResponse:
        """PUT /documents/{id} with ``{"strategy": S}``: re-ingest the stored PDF with strategy S
        (other fields of the record are ignored when unchanged; changing them is a 400)."""

        svc = self.services()
        with svc.sessions() as s:
            doc = self._get(s, RESOURCES["documents"], rid)
            current = RESOURCES["documents"].record(doc, s)
        changed = sorted(k for k, v in data.items() if k != "strategy" and k in current and current[k] != v)
        if changed:
            raise BridgeError(400, f"body: only 'strategy' can be changed (re-ingestion), not {changed[0]!r}")
        strategy = data.get("strategy", current["strategy"])
        if not isinstance(strategy, str):
            raise BridgeError(400, "strategy: must be a string")
        path = svc.settings.files_dir / f"{current['sha256']}.pdf"
        if not path.is_file():
            raise BridgeError(409, "the stored PDF of this document is missing; upload it again")
        out = await run_in_threadpool(
            ingest.ingest_bytes,
            svc,
            path.read_bytes(),
            current["doc_name"],
            DagsterRunner(),
            current["knowledge_base"],
            strategy,
        )
        if not out.ok:
            raise BridgeError(400 if out.status == "refused" else 500, f"re-ingestion {out.status}: {out.message}")
        return JSONResponse(out.document)

    async def delete(self, request: Request) -> JSONResponse:
        res = self._resource(request)
        self._writable(res, "delete")
        rid = request.path_params["id"]
        if res.name == "documents":

            def drop() -> dict[str, Any]:
                # as DELETE /documents/{id}: a run cannot claim the document meanwhile, and one under
                # way (the queue's two lanes run without a common lock) gets 409
                svc = self.services()
                with ingest.REGISTER_LOCK:
                    try:
                        info = ingest.delete_document(svc, rid, refuse_running=True)
                    except KeyError:
                        raise BridgeError(404, f"documents {rid} not found") from None
                    except ingest.DocumentBusyError as e:
                        raise BridgeError(409, str(e)) from None
                remove_partition(svc, rid)
                return info

            return JSONResponse(await run_in_threadpool(drop))

        def work() -> dict[str, Any]:
            with self.services().sessions.begin() as s:
                row = self._get(s, res, rid)
                rec = res.record(row, s)
                s.delete(row)
                return rec

        return JSONResponse(await run_in_threadpool(work))

    # --- dispatch -----------------------------------------------------------------------------
    async def collection(self, request: Request) -> JSONResponse:
        write = request.method == "POST"
        self._check_key(request, write)
        if write:
            return await self.create(request)
        return await run_in_threadpool(self.list, request)

    async def item(self, request: Request) -> JSONResponse:
        write = request.method in ("PUT", "DELETE")
        self._check_key(request, write)
        if request.method == "PUT":
            return await self.update(request)
        if request.method == "DELETE":
            return await self.delete(request)
        return await run_in_threadpool(self.one, request)


def _error(request: Request, exc: Exception) -> JSONResponse:
    if isinstance(exc, BridgeError):
        return JSONResponse({"message": exc.message}, status_code=exc.status)
    if isinstance(exc, HTTPException):
        return JSONResponse({"message": exc.detail}, status_code=exc.status_code)
    if isinstance(exc, SQLAlchemyError):
        return JSONResponse({"message": f"database error ({type(exc).__name__})"}, status_code=503)
    return JSONResponse({"message": f"internal error ({type(exc).__name__})"}, status_code=500)


def create_admin_app(services: Callable[[], Any], settings: Callable[[], Any]) -> Starlette:
    """The bridge as a Starlette app; mount it with ``app.mount("/admin/api", create_admin_app(...))``.
    ``services``/``settings`` are called per request (the API creates its services at start-up)."""
    b = Bridge(services, settings)
    routes = [
        Route("/{resource}", b.collection, methods=["GET", "POST"]),
        Route("/{resource}/{id}", b.item, methods=["GET", "PUT", "DELETE"]),
    ]
    return Starlette(
        routes=routes, exception_handlers={BridgeError: _error, HTTPException: _error, SQLAlchemyError: _error}
    )
