"""The stored PDF of a document: ``GET /documents/{id}/file`` (``application/pdf``, shown inline,
so a browser opens ``.../file#page=N`` at page N — the UI's citation links)."""

from __future__ import annotations

from pathlib import PurePosixPath

from fastapi import APIRouter, HTTPException
from fastapi.responses import FileResponse

from ragaudit.platform.db import Document

from ..deps import RequirePrivateKey, ServicesDep
from ..schemas import ErrorOut

router = APIRouter(prefix="/documents", tags=["documents"])


@router.get(
    "/{document_id}/file",
    response_class=FileResponse,
    dependencies=[RequirePrivateKey],
    responses={
        200: {"content": {"application/pdf": {}}, "description": "the PDF as uploaded"},
        404: {"model": ErrorOut},
    },
)
def document_file(document_id: str, svc: ServicesDep) -> FileResponse:
    """The PDF bytes of the document's current (queryable) version, as uploaded.

    404 when the document is unknown or its stored file is missing. Files are content-addressed
    (``files/<sha256>.pdf``), so the path is never built from user input. ``Content-Disposition``
    names the file by the last component of the document's name (RFC 6266 ``filename*`` when it
    has characters outside letters, digits and ``-._~``)."""
    with svc.sessions() as s:
        doc = s.get(Document, document_id)
        if doc is None:
            raise HTTPException(404, f"document {document_id} not found")
        sha, name = doc.sha256, doc.doc_name
    path = svc.settings.files_dir / f"{sha}.pdf"
    if not path.is_file():
        raise HTTPException(404, f"the stored file of document {document_id} is missing")
    # the download name is the name's last component (names keep folders: branch/report.pdf);
    # Starlette percent-encodes anything outside RFC 3986's unreserved set into RFC 6266's
    # filename*=utf-8''... (urllib.parse.quote), so quotes, semicolons or backslashes cannot
    # end or split the parameter
    filename = PurePosixPath(name).name or "document.pdf"
    return FileResponse(path, media_type="application/pdf", filename=filename, content_disposition_type="inline")
