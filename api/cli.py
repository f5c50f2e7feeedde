"""The ``ragaudit`` command: ingest PDFs, ask questions, serve the API."""

from __future__ import annotations

import atexit
import json
import logging
import os
import sys
import textwrap
from pathlib import Path
from typing import Annotated, Optional

import typer

from ragaudit.api.ingest_progress import IngestProgress
from ragaudit.platform.settings import Settings
from ragaudit.text.docnames import folder_names, printable
from ragaudit.types import DEFAULT_STRATEGY, Scope, Strategy

from .progress import Progress

app = typer.Typer(
    help="ragaudit: auditable RAG over your PDFs (offline by default).",
    no_args_is_help=True,
    rich_markup_mode=None,
    add_completion=False,
)


def _quiet() -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for name in ("dagster", "httpx", "sentence_transformers", "transformers", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)
    if "transformers" in sys.modules:  # loaded already; else whoever loads it quiets it (ragaudit.index.embedding)
        from ragaudit.index.embedding import (
            quiet_transformers,  # deferred: the embedding runtime, for commands that load it
        )

        quiet_transformers()


def _services(busy_ok: bool = False):
    """The shared services; exits with a one-line message when the embedded store is in use by
    another process. With ``busy_ok``: returns ``(services, busy)`` instead, ``busy`` True when
    another process holds the store (the services then must not touch ``store``)."""
    from ragaudit.services import (
        get_services,  # deferred: the model runtime and store clients, for commands that use them
    )

    svc = get_services(Settings())
    atexit.register(svc.close)
    try:
        _ = svc.store  # open the store now: Qdrant local mode allows one process per folder
    except RuntimeError as e:
        if "already accessed" not in str(e):
            raise
        if busy_ok:
            return svc, True
        typer.echo(
            f"error: {svc.settings.qdrant_path} is in use by another process (probably `ragaudit serve`): "
            "stop it, or use the running API (POST /documents to add, POST /query to ask), or use a Qdrant server "
            "(RAGAUDIT_QDRANT_URL)",
            err=True,
        )
        raise typer.Exit(1) from None
    return (svc, False) if busy_ok else svc


def _pdf_files(paths: list[Path]) -> list[tuple[Path, str]]:
    """``(file, document name)`` for every PDF named or found (recursively) in a folder; see
    ``ragaudit.text.docnames.folder_names`` for the names (path below the folder, unique in the batch)."""

    found: list[tuple[Path, str | None]] = []
    for p in paths:
        if p.is_dir():
            found.extend((q, str(p)) for q in sorted(p.rglob("*")) if q.is_file() and q.suffix.lower() == ".pdf")
        else:
            found.append((p, None))
    names = folder_names([(str(f), root) for f, root in found])
    return [(f, n) for (f, _), n in zip(found, names)]


@app.command()
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="PDF files or folders (searched recursively for *.pdf)")],
    knowledge_base: Annotated[str, typer.Option("--knowledge-base", "-k", help="Knowledge base name")] = "default",
    strategy: Annotated[Strategy, typer.Option("--strategy", help="Chunking strategy")] = DEFAULT_STRATEGY,
) -> None:
    """Ingest PDFs in one Dagster run (job ingest_files_job: each PDF is parsed in a bounded child
    process ahead of the one being embedded); one result line per document on stdout, per-file
    and per-stage progress on stderr; exit 1 if any was refused or failed.

    A document ingested again with another --strategy keeps its other strategies' chunks (for
    comparison: `ragaudit eval --strategy`); the latest becomes the one searched by default."""
    _quiet()
    from ragaudit.ingest.bulk import BulkFile  # deferred: the ingestion stack, for commands that ingest
    from ragaudit.ingest.documents import (  # deferred: the ingestion stack, for commands that ingest
        add_progress_listener,
        remove_progress_listener,
    )
    from ragaudit.pipelines.runner import run_bulk  # deferred: Dagster, for commands that ingest

    svc = _services()
    files = _pdf_files(paths)
    if not files:
        typer.echo("no PDF files found", err=True)
        raise typer.Exit(2)
    bad = 0
    todo = []
    for f, name in files:
        if not f.exists():
            typer.echo(f"refused   {printable(str(f))}: file not found")
            bad += 1
        else:
            todo.append(BulkFile(f, name))
    progress = IngestProgress(len(todo))

    def show(_: int, out) -> None:
        nonlocal bad
        shown = printable(out.doc_name)
        if out.ok:
            d = out.document or {}
            dups = out.extra.get("duplicate_of") or []
            same = (
                "; same bytes as " + ", ".join(printable(f"{x['knowledge_base']}/{x['doc_name']}") for x in dups)
                if dups
                else ""
            )
            progress.result(
                f"{out.status:<9} {shown}: {d.get('pages')} page{'' if d.get('pages') == 1 else 's'}, "
                f"{d.get('chunk_count')} {d.get('strategy')} chunks [{out.seconds:.1f}s] "
                f"id={d.get('id')}{same}"
            )
        else:
            bad += 1
            progress.result(f"{out.status:<9} {shown}: {printable(out.message)}")

    add_progress_listener(progress.listener)
    try:
        if todo:
            run_bulk(svc, todo, knowledge_base, strategy, on_outcome=show)
    finally:
        remove_progress_listener(progress.listener)
        progress.close()
    if bad:
        typer.echo(f"{bad} of {len(files)} file(s) not ingested", err=True)
        raise typer.Exit(1)


@app.command()
def reindex(
    all_docs: Annotated[bool, typer.Option("--all", help="Re-ingest every document")] = False,
    changed: Annotated[
        bool,
        typer.Option(
            "--changed",
            help="Re-ingest documents whose bytes, strategy, embedding "
            "model or settings changed, or whose index lost points (the default; "
            "with --doc: only the named documents that changed)",
        ),
    ] = False,
    doc: Annotated[
        Optional[list[str]],
        typer.Option(
            "--doc", help="Re-ingest this document (repeatable), even if nothing is found changed: repairs it"
        ),
    ] = None,
    knowledge_base: Annotated[Optional[str], typer.Option("--knowledge-base", "-k")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary JSON")] = False,
) -> None:
    """Re-ingest documents whose bytes (landing-folder file), chunking strategy, embedding model or
    chunk/index settings changed since their last ingestion, or whose index lost points or rows
    (--changed, default), all of them (--all), or the documents named with --doc (rebuilt even if
    they look unchanged; with --changed only if changed). Unchanged ones are skipped and counted.
    While `ragaudit serve` holds the embedded store, the documents are queued for it and this
    waits until they are done. A failed re-ingestion keeps the previous version searchable; exit 1
    if any failed."""
    _quiet()
    if all_docs and changed:
        typer.echo("error: --all and --changed exclude each other", err=True)
        raise typer.Exit(2)
    from ragaudit.ingest import reindex as ri  # deferred: the ingestion stack, for commands that ingest
    from ragaudit.pipelines.runner import DagsterRunner  # deferred: Dagster, for commands that ingest

    svc, busy = _services(busy_ok=True)

    def show(dec, out) -> None:
        if not as_json:
            state = "failed" if out is not None and not out.ok else "reingested"
            why = "; ".join(dec.reasons)
            msg = f" [{out.seconds:.1f}s] {printable(out.message)}" if out is not None else ""
            typer.echo(f"{state:<10} {printable(dec.knowledge_base + '/' + dec.doc_name)} ({printable(why)}){msg}")

    kw = dict(
        all_docs=all_docs,
        names=doc or None,
        knowledge_base=knowledge_base,
        force=bool(doc) and not changed,
        on_result=show,
    )
    try:
        if busy:
            if not as_json:
                typer.echo(
                    f"{svc.settings.qdrant_path} is held by the serving process: documents are queued for it "
                    "(lost points are only detected by the serving process or with --doc)",
                    err=True,
                )
            res = ri.run_via_queue(svc, **kw)
        else:
            res = ri.run(svc, DagsterRunner(), **kw)
    except KeyError as e:
        typer.echo(f"error: {e.args[0]}", err=True)
        raise typer.Exit(2) from None
    if as_json:
        typer.echo(json.dumps(res, indent=2, ensure_ascii=False))
    else:
        for name, why in res["skipped"].items():
            typer.echo(f"{'skipped':<10} {printable(name)}: {printable(why)}")
        typer.echo(
            f"{len(res['reingested'])} re-ingested, {len(res['failed'])} failed, {res['unchanged']} unchanged "
            f"(skipped), {len(res['skipped'])} not checked"
        )
    if res["failed"]:
        raise typer.Exit(1)


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="The question")],
    doc: Annotated[
        Optional[list[str]], typer.Option("--doc", help="Restrict to this document name (repeatable)")
    ] = None,
    knowledge_base: Annotated[Optional[str], typer.Option("--knowledge-base", "-k")] = None,
    top_k: Annotated[int, typer.Option("--top-k", min=1, max=100)] = 5,
    mode: Annotated[str, typer.Option("--mode", help="vector | bm25 | hybrid | hybrid_rerank")] = "hybrid",
    strategy: Annotated[
        Optional[Strategy], typer.Option("--strategy", help="Search chunks of this strategy (default: each document's)")
    ] = None,
    page_min: Annotated[Optional[int], typer.Option("--page-min", min=1)] = None,
    page_max: Annotated[Optional[int], typer.Option("--page-max", min=1)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the full answer JSON")] = False,
) -> None:
    """Answer a question with numbered citations; --json shows retrieval ranks, timings and usage."""
    _quiet()
    from ragaudit.query import QueryService  # deferred: the retrieval and answer stack, for commands that use it

    svc = _services()
    try:
        scope = Scope(
            doc_names=doc or [], knowledge_base=knowledge_base, strategy=strategy, page_min=page_min, page_max=page_max
        )
        out = QueryService(svc).ask(question, scope, top_k, mode)
    except ValueError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    if as_json:
        typer.echo(json.dumps(out, indent=2, ensure_ascii=False))
        return
    typer.echo(out["answer"])
    if out.get("concise"):
        c = out["concise"]
        typer.echo(f"\nConcise answer: {c['text']} ({c['type']}, {c['rule']}, confidence {c['confidence']:.2f})")
    for f in out.get("rules") or []:
        typer.echo(f"  rule {f['rule']} ({f['effect']}): {f['reason']}")
    typer.echo(f"\n[{out['label']}]")
    for c in out["citations"]:
        typer.echo(citation_line(c))
    cost = out["usage"]["cost_usd"]
    cost_text = "cost unknown (no price for this model)" if cost is None else f"${cost:.6f}"
    typer.echo(f"  {out['timings_ms']['total']:.0f} ms, {out['usage']['model']}, {cost_text}")


@app.command()
def documents(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List ingested documents (from the database: works while the server runs)."""
    _quiet()
    from sqlalchemy import select  # deferred: SQLAlchemy, for `ragaudit documents`

    from ragaudit.platform.db import Document  # deferred: the database and telemetry stack, for commands that use it

    svc, _busy = _services(busy_ok=True)  # the database alone: also while `ragaudit serve` holds the store
    with svc.sessions() as s:
        docs = [d.as_dict() for d in s.scalars(select(Document).order_by(Document.doc_name))]
    if as_json:
        typer.echo(json.dumps(docs, indent=2))
        return

    if not docs:  # say where it looked: a data folder is relative to where the command runs
        typer.echo(
            f"no documents in {printable(str(svc.settings.data_dir.resolve()))} (RAGAUDIT_DATA_DIR; "
            "`ragaudit ingest PATH` or the UI adds some)",
            err=True,
        )
    for d in docs:  # one line per document: control characters in names are escaped
        typer.echo(
            f"{d['id']}  {d['status']:<7} {printable(d['knowledge_base'] + '/' + d['doc_name'])}: "
            f"{d['pages']} page{'' if d['pages'] == 1 else 's'}, {d['chunk_count']} chunks"
        )


def citation_line(c: dict) -> str:
    """One citation of ``ragaudit ask``'s text output: ``  [n] doc p.N: "quote"``, the quote in at most
    160 characters, cut between words (a cut inside "$3.1 billion" printed "$3." as if a value)."""
    quote = textwrap.shorten(c["quote"], 160, placeholder=" …")
    return f'  [{c["n"]}] {c["doc_name"]} p.{c["page"]}: "{quote}"'


def _print_eval_table(res: dict, question_split: str) -> None:
    """The results as text: the dataset and its question counts in words (``question_split``, which
    questions the ``n`` column counts), retrieval metrics per mode, answer metrics, comparisons."""
    typer.echo(f"dataset {res['dataset']['name']}; judge: {res['judge']}")
    typer.echo(question_split)
    typer.echo(
        f"{'mode':<14}"
        + "".join(f"{k:>20}" for k in ("hit@1", "hit@5", "hit@10", "mrr", "ndcg@10", "evidence_recall@5"))
        + f"{'n':>5}"
    )
    for m, v in res["modes"].items():
        typer.echo(
            f"{m:<14}"
            + "".join(
                f"{(v[k] if v[k] is not None else float('nan')):>20.3f}"
                for k in ("hit@1", "hit@5", "hit@10", "mrr", "ndcg@10", "evidence_recall@5")
            )
            + f"{v['n']:>5}"
        )
    for m, v in (res.get("answers") or {}).items():
        parts = ", ".join(
            f"{k} {v[k]:.3f}"
            for k in (
                "exact_match",
                "f1",
                "f1_gold_guided",
                "refusal_accuracy",
                "citation_validity",
                "answered_cited",
                "faithfulness",
                "concise_coverage",
                "concise_precision",
            )
            if v.get(k) is not None
        )
        typer.echo(
            f"answers {m}: {parts}; {v['latency_ms']['mean'] if v['latency_ms'] else 0:.0f} ms/question, "
            f"${v['cost_usd']['total']:.6f}"
        )
    for name, c in res.get("comparisons", {}).items():
        for metric, ci in c.items():
            typer.echo(f"{name} {metric}: diff {ci['diff']} 95% CI {ci['ci95']} (n={ci['n']})")
    for m, why in res.get("skipped_modes", {}).items():
        typer.echo(f"skipped {m}: {why}")
    if res.get("judge_control"):
        jc = res["judge_control"]
        # runs stored before the verdict was recorded have only the counts
        verdict = (
            jc.get("verdict") or f"{jc['failed']}/{jc['n']} mismatched answer/context pairs rejected (all must be)"
        )
        typer.echo(f"judge control: {verdict}")


@app.command("eval")
def eval_cmd(
    dataset: Annotated[
        str,
        typer.Option(
            "--dataset", help="JSONL file (dev-set format), imported dataset name/id, or generated[:KB[/DOC]]"
        ),
    ],
    modes: Annotated[
        Optional[str],
        typer.Option(
            "--modes",
            help="Comma-separated: vector,bm25,hybrid,hybrid_rerank "
            "(default: every configured mode; hybrid_rerank needs RAGAUDIT_RERANKER_MODEL)",
        ),
    ] = None,
    top_k: Annotated[Optional[int], typer.Option("--top-k", min=1, max=100, help="Sources per answer")] = None,
    retrieval_only: Annotated[
        bool, typer.Option("--retrieval-only", help="No answers: retrieval metrics only")
    ] = False,
    strategy: Annotated[
        Optional[Strategy], typer.Option("--strategy", help="Evaluate chunks of this strategy only")
    ] = None,
    knowledge_base: Annotated[Optional[str], typer.Option("--knowledge-base", "-k")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the results JSON")] = False,
) -> None:
    """Evaluate retrieval (hit@k, MRR, nDCG@10, evidence recall) and answers (EM, F1, refusal,
    citations, faithfulness) per mode with bootstrap CIs; the run is stored like POST /evaluate's.
    The default modes are the configured ones; hybrid_rerank asked for without a reranker is
    skipped (with a note)."""
    _quiet()
    from ragaudit.evaluate.evaluation import EvalParams  # deferred: the evaluation stack, for `ragaudit eval`
    from ragaudit.evaluate.runs import (  # deferred: the evaluation stack, for `ragaudit eval`
        create_run,
        execute_run,
        summarize,
    )

    svc = _services()
    params = EvalParams(
        modes=None if modes is None else [m.strip() for m in modes.split(",") if m.strip()],
        top_k=top_k,
        answers=not retrieval_only,
        strategy=strategy.value if strategy else None,
        knowledge_base=knowledge_base,
    )
    try:
        run_id = create_run(svc, dataset, params, files=True)
    except (KeyError, ValueError) as e:
        typer.echo(f"error: {e.args[0] if e.args else e}", err=True)
        raise typer.Exit(2) from None
    progress = Progress("eval (questions x modes)")
    try:
        res = execute_run(svc, run_id, on_progress=progress.update)
    finally:
        progress.close()
    if as_json:
        typer.echo(json.dumps(res, indent=2, ensure_ascii=False))
    else:
        _print_eval_table(res, summarize(res)["question_split"])


@app.command("mcp")
def mcp_stdio() -> None:
    """Serve the MCP tools (search, ask, list_documents, get_chunk) over stdio, for an MCP client
    that starts this command (Claude Desktop, an IDE, an agent). Uses this machine's settings
    (RAGAUDIT_*) and data folder; while `ragaudit serve` holds the embedded store, point the
    client at the API's /mcp instead."""
    _quiet()
    from ragaudit.api.mcp_server import build_mcp_server  # deferred: the MCP SDK, for `ragaudit mcp`
    from ragaudit.platform import tracing  # deferred: the database and telemetry stack, for commands that use it
    from ragaudit.platform.cache import (
        AnswerCache,  # deferred: the database and telemetry stack, for commands that use it
    )
    from ragaudit.platform.telemetry import (
        TelemetryWriter,  # deferred: the database and telemetry stack, for commands that use it
    )
    from ragaudit.query import QueryService  # deferred: the retrieval and answer stack, for commands that use it

    svc = _services()
    telemetry = TelemetryWriter.from_services(svc, background=True)
    qs = QueryService(svc, telemetry=telemetry, cache=AnswerCache.from_services(svc))
    try:
        build_mcp_server(lambda: qs, lambda: svc).run("stdio")
    finally:
        telemetry.close(timeout=10.0)
        tracing.shutdown()


@app.command()
def rules(as_json: Annotated[bool, typer.Option("--json", help="JSON output")] = False) -> None:
    """List the rules of the answer path (retrieval, gate, answer, concise), in the order they run, with
    what each is for and whether it is on (RAGAUDIT_DISABLED_RULES switches rules off by name)."""
    import ragaudit.query  # noqa: F401  (imports the stage modules, which register their rules)
    from ragaudit.platform.rules import (  # deferred: the database and telemetry stack, for commands that use it
        all_rules,
        check_names,
    )

    try:
        off = check_names(Settings().disabled_rules)
    except ValueError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    listed = [{"rule": r.name, "stage": r.stage, "on": r.name not in off, "why": r.why} for r in all_rules()]
    if as_json:
        typer.echo(json.dumps(listed, indent=2))
        return
    for r in listed:
        typer.echo(f"{'on ' if r['on'] else 'OFF'}  {r['rule']:34s} {r['why']}")


@app.command()
def serve(
    host: Annotated[
        Optional[str], typer.Option(help="Bind address (default RAGAUDIT_HOST, 127.0.0.1; prefer the setting)")
    ] = None,
    port: Annotated[
        Optional[int],
        typer.Option(help="Port (default RAGAUDIT_PORT, 8000; prefer the setting: the Dagster processes read it)"),
    ] = None,
) -> None:
    """Serve the HTTP API (and the built frontend, if present) with uvicorn. Uploads are ingested
    by a worker thread of this process, which also executes runs launched from the Dagster UI,
    sensor and schedule in the embedded mode (docs/operations.md)."""
    _quiet()
    import uvicorn  # deferred: the web server, for `ragaudit serve`

    from ragaudit.api.app import create_app  # deferred: the web app, for `ragaudit serve`

    settings = Settings()
    given = settings.model_copy(update={"host": host or settings.host, "port": port or settings.port})
    if given.internal_api_url != settings.internal_api_url and settings.embedded and not settings.api_url:
        # the Dagster processes' run launcher reaches this process from the settings, not from this option
        typer.echo(
            f"warning: serving at {given.internal_api_url}, but a Dagster webserver or daemon with these "
            f"settings hands its runs to {settings.internal_api_url} (RAGAUDIT_HOST/RAGAUDIT_PORT): set "
            f"RAGAUDIT_HOST={given.host} RAGAUDIT_PORT={given.port} for every process instead of --host/--port",
            err=True,
        )
    uvicorn.run(create_app(given), host=given.host, port=given.port, log_level="info")


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
