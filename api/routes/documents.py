"""Document upload (asynchronous by default), listing, ingestion progress (JSON and SSE) and deletion."""

from __future__ import annotations

import asyncio
import json
import time
from typing import NoReturn

from fastapi import APIRouter, File, Form, HTTPException, Query, Request, Response, UploadFile, status
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from sqlalchemy import select
from sse_starlette.sse import EventSourceResponse

from ragaudit.ingest import documents as ingest
from ragaudit.ingest.pdf import PDFError
from ragaudit.pipelines.runner import DagsterRunner, remove_partition
from ragaudit.platform.db import Document
from ragaudit.platform.telemetry import clip_text
from ragaudit.text.docnames import InvalidNameError, printable, upload_name
from ragaudit.types import DEFAULT_STRATEGY, Strategy

from ..deps import IngestQueueDep, RequireReadKey, RequireWriteKey, ServicesDep, SettingsDep
from ..errors import short_input
from ..schemas import DocumentOut, ErrorOut, IngestOut

router = APIRouter(prefix="/documents", tags=["documents"])

_STATUS_FOR = {
    "not_a_pdf": 415,
    "empty_file": 422,
    "encrypted": 422,
    "corrupt": 422,
    "no_text": 422,
    "invalid_pdf": 422,
    "invalid_request": 400,
    "invalid_name": 422,
    "busy": 409,
}


@router.post(
    "",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=IngestOut,
    dependencies=[RequireWriteKey],
    responses={
        200: {"model": IngestOut, "description": "unchanged: the same bytes are already ingested"},
        201: {"model": IngestOut, "description": "ingested (with ?wait=true)"},
        400: {"model": ErrorOut},
        409: {"model": ErrorOut},
        413: {"model": ErrorOut},
        415: {"model": ErrorOut},
        422: {"model": ErrorOut},
        500: {"model": ErrorOut},
    },
)
async def upload_document(
    request: Request,
    svc: ServicesDep,
    settings: SettingsDep,
    jobs: IngestQueueDep,
    response: Response,
    file: UploadFile = File(...),
    knowledge_base: str = Form(ingest.DEFAULT_KB),
    name: str | None = Form(
        None,
        description="Document name (default: the file's name); "
        "may keep folders, e.g. branch_alder/report.pdf. At most 255 "
        "characters, no control characters.",
    ),
    strategy: str = Form(DEFAULT_STRATEGY.value, description="fixed | sentence | heading | semantic"),
    wait: bool = Query(
        False,
        description="true = ingest before answering (201 with the "
        "ready document); default: answer 202 at once and ingest in the "
        "background",
    ),
) -> IngestOut:
    """Upload a PDF; it is ingested (extract, chunk, embed, index) by the Dagster asset job.

    The upload is validated at once: bad input (not a PDF, empty, encrypted, truncated, no text
    layer, a bad name) is refused with 4xx and a ``detail`` that says what is wrong; nothing is
    stored. A valid file is stored and the answer is ``202`` with the document in status
    ``queued``; a background worker runs the ingestion (one at a time) and the document moves
    through ``extracting -> chunking -> embedding -> indexing -> ready`` (or ``failed`` with
    ``error``): poll ``GET /documents/{id}`` or follow ``GET /documents/{id}/events`` (SSE).
    With ``?wait=true`` the request returns when the ingestion is done (``201``; a failure is
    4xx/500 and leaves nothing of a new document).

    A document is ``(knowledge_base, name)``: re-uploading identical bytes under the same name
    answers ``200`` with ``status: unchanged`` at once; a changed file replaces the old version
    once the new one is indexed (the old one stays searchable until then); a new version sent
    while one is being built gets ``409``. Identical bytes under another name or in another
    knowledge base become a document of their own, listed in ``duplicate_of``.

    A form field other than ``file``, ``name``, ``knowledge_base`` and ``strategy``, a query
    parameter other than ``wait``, and a form field given twice are refused with 422 naming them,
    before anything is read or stored: a misspelt one (``knowledgebase``) or one sent in the query
    string would otherwise file the document under the default knowledge base without a word, and
    a second file would be dropped.
    """
    await refuse_unknown_form_fields(request)
    limit = settings.max_upload_mb * 1024 * 1024
    data = await file.read(limit + 1)
    if len(data) > limit:
        raise HTTPException(413, f"file too large: limit is {settings.max_upload_mb} MB")
    name = name if name is not None else upload_name(file.filename)
    kb, strategy = knowledge_base or ingest.DEFAULT_KB, strategy or DEFAULT_STRATEGY.value
    if wait:
        out = await run_in_threadpool(ingest.ingest_bytes, svc, data, name, DagsterRunner(), kb, strategy)
        if out.status in ("refused", "failed"):
            _refuse(name, out.status, out.error_code, out.message)
        response.status_code = 200 if out.status == "unchanged" else 201
        return IngestOut(
            status=out.status,
            message=out.message,
            seconds=round(out.seconds, 3),
            document=DocumentOut(**out.document),
            duplicate_of=out.extra.get("duplicate_of", []),
            replaces=out.extra.get("replaces"),
        )
    t = time.perf_counter()
    try:
        doc, needs_run = await run_in_threadpool(ingest.register, svc, data, name, kb, Strategy.parse(strategy))
    except PDFError as e:
        _refuse(name, "refused", e.code, str(e))
    except InvalidNameError as e:
        _refuse(name, "refused", "invalid_name", str(e))
    except ingest.DocumentBusyError as e:
        _refuse(name, "refused", "busy", str(e))
    except ValueError as e:
        _refuse(name, "refused", "invalid_request", str(e))
    replaces = ingest.replaced_version(doc) if needs_run else None
    if needs_run:
        jobs.submit(doc.id)
        state, message = "queued", "queued for ingestion; follow /documents/{id}/events"
        if replaces:
            message += f"; {ingest.replaced_note(doc.doc_name, replaces)}"
    elif doc.status in ingest.ACTIVE:
        jobs.submit(doc.id)  # already queued or running with these bytes (a no-op when already waiting)
        state, message = "queued", f"this version is already being ingested (status {doc.status})"
    else:
        response.status_code = 200
        state, message = "unchanged", "same content already ingested; nothing changed"
    dups = ingest.duplicates_of(svc, doc.id, ingest.target_version(doc))
    return IngestOut(
        status=state,
        message=message,
        seconds=round(time.perf_counter() - t, 3),
        document=DocumentOut(**doc.as_dict()),
        duplicate_of=dups,
        replaces=replaces,
    )


#: the form fields of ``POST /documents`` (``wait`` is a query parameter: ``?wait=true``)
UPLOAD_FORM_FIELDS = ("file", "name", "knowledge_base", "strategy")


#: the query parameters of ``POST /documents`` (the rest are form fields: ``UPLOAD_FORM_FIELDS``)
UPLOAD_QUERY_PARAMS = ("wait",)


async def refuse_unknown_form_fields(request: Request) -> None:
    """422 (FastAPI's validation shape) for each field of the upload that would otherwise be
    dropped without a word: a form field not in ``UPLOAD_FORM_FIELDS`` or a query parameter not in
    ``UPLOAD_QUERY_PARAMS`` (``extra_forbidden``, naming the allowed ones: ``?knowledge_base=``
    would file the document under the default knowledge base), and a form field given more than
    once (``too_many``: a second ``file`` would be dropped, one ``name`` of two ignored). The form
    is the one FastAPI already parsed (Starlette keeps it on the request)."""
    form = await request.form()
    allowed = ", ".join(UPLOAD_FORM_FIELDS)
    errors = []
    for key in dict.fromkeys(form.keys()):
        if key in UPLOAD_FORM_FIELDS:
            if (n := len(form.getlist(key))) > 1:
                more = "; upload one file per request" if key == "file" else ""
                errors.append(
                    {
                        "type": "too_many",
                        "loc": ("body", key),
                        "msg": f"the form field {key} is given {n} times: give it once{more}",
                        "input": n,
                    }
                )
            continue
        hint = " (wait is a query parameter: POST /documents?wait=true)" if key == "wait" else ""
        errors.append(
            {
                "type": "extra_forbidden",
                "loc": ("body", clip_text(key, 100)),
                "msg": f"Extra inputs are not permitted: the form fields are {allowed}{hint}",
                "input": short_input(form[key] if isinstance(form[key], str) else "(a file)"),
            }
        )
    for key in dict.fromkeys(request.query_params.keys()):
        if key in UPLOAD_QUERY_PARAMS:
            continue
        hint = f" ({key} is a form field: -F {key}=...)" if key in UPLOAD_FORM_FIELDS else ""
        errors.append(
            {
                "type": "extra_forbidden",
                "loc": ("query", clip_text(key, 100)),
                "msg": f"Extra inputs are not permitted: the query parameter is wait{hint}",
                "input": short_input(request.query_params[key]),
            }
        )
    if errors:
        raise RequestValidationError(errors)


def _refuse(name: str, state: str, code: str | None, message: str) -> NoReturn:
    status_code = _STATUS_FOR.get(code or "", 500 if state == "failed" else 422)
    shown = printable(name if len(name) <= 120 else name[:120] + "…")
    detail = f"{shown}: {message.removeprefix(f'{name}: ')}"  # the name once, printable
    raise HTTPException(status_code, detail, headers={"X-Error-Code": code or "error"})


@router.get("", response_model=list[DocumentOut], dependencies=[RequireReadKey])
def list_documents(svc: ServicesDep, knowledge_base: str | None = None) -> list[DocumentOut]:
    """All documents (optionally of one knowledge base), newest first."""
    with svc.sessions() as s:
        q = select(Document).order_by(Document.created_at.desc())
        if knowledge_base:
            q = q.where(Document.knowledge_base == knowledge_base)
        return [DocumentOut(**d.as_dict()) for d in s.scalars(q)]


@router.get(
    "/{document_id}", response_model=DocumentOut, responses={404: {"model": ErrorOut}}, dependencies=[RequireReadKey]
)
def get_document(document_id: str, svc: ServicesDep) -> DocumentOut:
    with svc.sessions() as s:
        doc = s.get(Document, document_id)
        if doc is None:
            raise HTTPException(404, f"document {document_id} not found")
        return DocumentOut(**doc.as_dict())


@router.get(
    "/{document_id}/events",
    responses={404: {"model": ErrorOut}},
    dependencies=[RequireReadKey],
    response_class=EventSourceResponse,
)
async def document_events(
    document_id: str,
    svc: ServicesDep,
    request: Request,
    interval_s: float = Query(0.5, ge=0.05, le=10, description="Poll interval of the row"),
):
    """Server-Sent Events of a document's ingestion: an event ``progress`` whenever status or
    progress changes (data: ``{id, status, error, pages: {done, total}, chunks: {done, total}}``),
    then one event ``ready`` or ``failed`` (same data) and the stream ends. A document that is
    already ready or failed gets that one final event at once.

    Runs of this process report each progress write as it happens (every stage, however short,
    and pages as they are extracted); the row is also read every ``interval_s`` seconds, so runs
    executed by any other process (the Dagster daemon with a Qdrant server) are followed alike."""

    def read() -> dict | None:
        with svc.sessions() as s:
            doc = s.get(Document, document_id)
            return doc.progress() if doc is not None else None

    first = await run_in_threadpool(read)
    if first is None:
        raise HTTPException(404, f"document {document_id} not found")
    loop = asyncio.get_running_loop()
    writes: asyncio.Queue[dict] = asyncio.Queue()

    def listener(doc_id: str | None, values: dict) -> None:  # called in the thread that wrote the progress
        if doc_id == document_id:
            loop.call_soon_threadsafe(writes.put_nowait, dict(values))

    async def stream():
        ingest.add_progress_listener(listener)
        try:
            last, state = None, first
            while True:
                if state is None:
                    yield {
                        "event": "failed",
                        "data": json.dumps(
                            {"id": document_id, "status": "deleted", "error": "the document was deleted"}
                        ),
                    }
                    return
                if state["status"] not in ingest.ACTIVE:
                    yield {"event": state["status"], "data": json.dumps(state)}
                    return
                if state != last:
                    yield {"event": "progress", "data": json.dumps(state)}
                    last = state
                if await request.is_disconnected():
                    return
                try:
                    state = _with_progress(state, await asyncio.wait_for(writes.get(), interval_s))
                except TimeoutError:
                    read_state = await run_in_threadpool(read)
                    if writes.empty():  # else a write seen meanwhile is newer than this read
                        state = read_state
        finally:
            ingest.remove_progress_listener(listener)

    return EventSourceResponse(stream(), ping=15)


def _with_progress(state: dict, values: dict) -> dict:
    """``state`` (``Document.progress()``) updated with a progress write's ``values``
    (``status``, ``error``, ``pages_done``, ``pages_total``, ``chunks_done``, ``chunks_total``)."""
    out = {**state, "pages": dict(state["pages"]), "chunks": dict(state["chunks"])}
    for k in ("status", "error"):
        if k in values:
            out[k] = values[k]
    for part in ("pages", "chunks"):
        for end in ("done", "total"):
            if f"{part}_{end}" in values:
                out[part][end] = values[f"{part}_{end}"]
    return out


@router.delete(
    "/{document_id}",
    response_model=DocumentOut,
    responses={401: {"model": ErrorOut}, 404: {"model": ErrorOut}, 409: {"model": ErrorOut}},
    dependencies=[RequireWriteKey],
)
def delete_document(document_id: str, svc: ServicesDep) -> DocumentOut:
    """Delete a document: its Qdrant points, chunk rows, Q&A pairs and its row. A queued document
    is deleted before it runs; one whose run is under way gets 409 (delete it when it is done)."""
    with ingest.REGISTER_LOCK:  # a run cannot claim the document meanwhile; other runs go on
        try:
            info = ingest.delete_document(svc, document_id, refuse_running=True)
        except KeyError:
            raise HTTPException(404, f"document {document_id} not found") from None
        except ingest.DocumentBusyError as e:
            raise HTTPException(409, str(e)) from None
    remove_partition(svc, document_id)
    return DocumentOut(**info)
