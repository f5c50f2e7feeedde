"""Document upload, listing and deletion."""

from __future__ import annotations

from fastapi import APIRouter, File, Form, HTTPException, UploadFile, status
from fastapi.concurrency import run_in_threadpool
from sqlalchemy import select

from core import ingest
from core.db import Document
from core.names import printable, upload_name
from pipelines.runner import DagsterRunner, remove_partition

from ..deps import RequireReadKey, RequireWriteKey, ServicesDep, SettingsDep
from ..schemas import DocumentOut, ErrorOut, IngestOut

router = APIRouter(prefix="/documents", tags=["documents"])

_STATUS_FOR = {"not_a_pdf": 415, "empty_file": 422, "encrypted": 422, "corrupt": 422, "no_text": 422,
               "invalid_pdf": 422, "invalid_request": 400, "invalid_name": 422}


@router.post("", status_code=status.HTTP_201_CREATED, response_model=IngestOut, dependencies=[RequireWriteKey],
             responses={400: {"model": ErrorOut}, 413: {"model": ErrorOut}, 415: {"model": ErrorOut},
                        422: {"model": ErrorOut}, 500: {"model": ErrorOut}})
async def upload_document(svc: ServicesDep, settings: SettingsDep, file: UploadFile = File(...),
                          knowledge_base: str = Form(ingest.DEFAULT_KB),
                          name: str | None = Form(None, description="Document name (default: the file's name); "
                                                  "may keep folders, e.g. branch_alder/report.pdf. At most 255 "
                                                  "characters, no control characters."),
                          strategy: str = Form(ingest.DEFAULT_STRATEGY,
                                               description="fixed | sentence | heading | semantic")) -> IngestOut:
    """Upload a PDF and ingest it (extract, chunk, embed, index) through the Dagster asset job.

    Bad input (not a PDF, empty, encrypted, truncated, no text layer) is refused with 4xx and a
    ``detail`` that says what is wrong; nothing is stored. A document is ``(knowledge_base, name)``:
    re-uploading identical bytes under the same name returns ``status: unchanged``; a changed file
    replaces the old version once the new one is indexed; identical bytes under another name or
    in another knowledge base become a document of their own, listed in ``duplicate_of``.
    A name that cannot be stored (too long, control characters) gets 422.
    """
    limit = settings.max_upload_mb * 1024 * 1024
    data = await file.read(limit + 1)
    if len(data) > limit:
        raise HTTPException(413, f"file too large: limit is {settings.max_upload_mb} MB")
    name = name if name is not None else upload_name(file.filename)
    out = await run_in_threadpool(ingest.ingest_bytes, svc, data, name, DagsterRunner(),
                                  knowledge_base or ingest.DEFAULT_KB, strategy or ingest.DEFAULT_STRATEGY)
    if out.status in ("refused", "failed"):
        code = _STATUS_FOR.get(out.error_code or "", 500 if out.status == "failed" else 422)
        label = printable(name[:120])
        raise HTTPException(code, f"{label}: {out.message}", headers={"X-Error-Code": out.error_code or "error"})
    return IngestOut(status=out.status, message=out.message, seconds=round(out.seconds, 3),
                     document=DocumentOut(**out.document), duplicate_of=out.extra.get("duplicate_of", []))


@router.get("", response_model=list[DocumentOut], dependencies=[RequireReadKey])
def list_documents(svc: ServicesDep, knowledge_base: str | None = None) -> list[DocumentOut]:
    """All documents (optionally of one knowledge base), newest first."""
    with svc.sessions() as s:
        q = select(Document).order_by(Document.created_at.desc())
        if knowledge_base:
            q = q.where(Document.knowledge_base == knowledge_base)
        return [DocumentOut(**d.as_dict()) for d in s.scalars(q)]


@router.get("/{document_id}", response_model=DocumentOut, responses={404: {"model": ErrorOut}},
            dependencies=[RequireReadKey])
def get_document(document_id: str, svc: ServicesDep) -> DocumentOut:
    with svc.sessions() as s:
        doc = s.get(Document, document_id)
        if doc is None:
            raise HTTPException(404, f"document {document_id} not found")
        return DocumentOut(**doc.as_dict())


@router.delete("/{document_id}", response_model=DocumentOut, responses={401: {"model": ErrorOut}, 404: {"model": ErrorOut}},
               dependencies=[RequireWriteKey])
def delete_document(document_id: str, svc: ServicesDep) -> DocumentOut:
    """Delete a document: its Qdrant points, chunk rows, Q&A pairs and its row."""
    with ingest.INGEST_LOCK:
        try:
            info = ingest.delete_document(svc, document_id)
        except KeyError:
            raise HTTPException(404, f"document {document_id} not found") from None
        remove_partition(svc, document_id)
    return DocumentOut(**info)
