"""The ``ragaudit`` command: ingest PDFs, ask questions, serve the API."""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

app = typer.Typer(help="ragaudit: auditable RAG over your PDFs (offline by default).", no_args_is_help=True,
                  add_completion=False)


def _quiet() -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for name in ("dagster", "httpx", "sentence_transformers", "transformers", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
    except Exception:
        pass


def _services():
    from core.services import get_services
    from core.settings import Settings

    import atexit

    svc = get_services(Settings())
    atexit.register(svc.close)
    return svc


def _pdf_files(paths: list[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out.extend(sorted(q for q in p.rglob("*") if q.is_file() and q.suffix.lower() == ".pdf"))
        else:
            out.append(p)
    return out


@app.command()
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="PDF files or folders (searched recursively for *.pdf)")],
    knowledge_base: Annotated[str, typer.Option("--knowledge-base", "-k", help="Knowledge base name")] = "default",
    strategy: Annotated[str, typer.Option("--strategy", help="Chunking: fixed | sentence | heading | semantic")] = "sentence",
) -> None:
    """Ingest PDFs through the Dagster asset job; one line per document; exit 1 if any was refused.

    A document ingested again with another --strategy keeps its other strategies' chunks (for
    comparison: `ragaudit eval --strategy`); the latest becomes the one searched by default."""
    _quiet()
    from core.ingest import ingest_bytes
    from pipelines.runner import DagsterRunner

    svc = _services()
    runner = DagsterRunner()
    files = _pdf_files(paths)
    if not files:
        typer.echo("no PDF files found", err=True)
        raise typer.Exit(2)
    bad = 0
    for f in files:
        if not f.exists():
            typer.echo(f"refused   {f}: file not found")
            bad += 1
            continue
        out = ingest_bytes(svc, f.read_bytes(), f.name, runner, knowledge_base, strategy)
        if out.ok:
            d = out.document or {}
            typer.echo(f"{out.status:<9} {f.name}: {d.get('pages')} pages, {d.get('chunk_count')} {d.get('strategy')} chunks "
                       f"[{out.seconds:.1f}s] id={d.get('id')}")
        else:
            bad += 1
            typer.echo(f"{out.status:<9} {f.name}: {out.message}")
    if bad:
        typer.echo(f"{bad} of {len(files)} file(s) not ingested", err=True)
        raise typer.Exit(1)


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="The question")],
    doc: Annotated[Optional[list[str]], typer.Option("--doc", help="Restrict to this document name (repeatable)")] = None,
    knowledge_base: Annotated[Optional[str], typer.Option("--knowledge-base", "-k")] = None,
    top_k: Annotated[int, typer.Option("--top-k", min=1, max=100)] = 5,
    mode: Annotated[str, typer.Option("--mode", help="vector | bm25 | hybrid | hybrid_rerank")] = "hybrid",
    strategy: Annotated[Optional[str], typer.Option("--strategy", help="Search chunks of this strategy")] = None,
    page_min: Annotated[Optional[int], typer.Option("--page-min", min=1)] = None,
    page_max: Annotated[Optional[int], typer.Option("--page-max", min=1)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the full answer JSON")] = False,
) -> None:
    """Answer a question with numbered citations; --json shows retrieval ranks, timings and usage."""
    _quiet()
    from core.query import QueryService
    from core.store import Scope

    svc = _services()
    try:
        scope = Scope(doc_names=doc or [], knowledge_base=knowledge_base, strategy=strategy, page_min=page_min,
                      page_max=page_max)
        out = QueryService(svc).ask(question, scope, top_k, mode)
    except ValueError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2)
    if as_json:
        typer.echo(json.dumps(out, indent=2, ensure_ascii=False))
        return
    typer.echo(out["answer"])
    typer.echo(f"\n[{out['label']}]")
    for c in out["citations"]:
        typer.echo(f"  [{c['n']}] {c['doc_name']} p.{c['page']}: \"{c['quote'][:160]}\"")
    typer.echo(f"  {out['timings_ms']['total']:.0f} ms, {out['usage']['model']}, ${out['usage']['cost_usd']:.6f}")


@app.command()
def documents(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List ingested documents."""
    _quiet()
    from sqlalchemy import select

    from core.db import Document

    svc = _services()
    with svc.sessions() as s:
        docs = [d.as_dict() for d in s.scalars(select(Document).order_by(Document.doc_name))]
    if as_json:
        typer.echo(json.dumps(docs, indent=2))
        return
    for d in docs:
        typer.echo(f"{d['id']}  {d['status']:<7} {d['knowledge_base']}/{d['doc_name']}: {d['pages']} pages, "
                   f"{d['chunk_count']} chunks")


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Bind address")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port")] = 8000,
) -> None:
    """Serve the HTTP API (and the built frontend, if present) with uvicorn."""
    _quiet()
    import uvicorn

    from api.app import create_app
    from core.settings import Settings

    uvicorn.run(create_app(Settings()), host=host, port=port, log_level="info")


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
