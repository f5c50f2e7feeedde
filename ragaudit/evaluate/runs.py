"""Datasets and evaluation runs stored in SQL, shared by ``POST /datasets``, ``POST /evaluate``
and ``ragaudit eval`` (one code path: ``create_run`` then ``execute_run``).

Dataset references (``resolve_dataset``):
- the id or name of an imported dataset (``import_dataset``; over HTTP ``POST /datasets``);
- ``generated`` (all gold pairs generated at ingestion), ``generated:<knowledge_base>`` or
  ``generated:<knowledge_base>/<doc_name>``;
- only with ``files=True`` (the CLI, in-process callers): a path to a JSONL file in the dev-set
  format, which wins over a dataset of that name. The HTTP API never passes it, so a client's
  string is never opened as a server path (nor can it learn whether such a file exists).
"""

from __future__ import annotations

import logging
import threading
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any

from sqlalchemy import delete, func, select

from ragaudit.evaluate.evaluation import EvalParams, GoldQuestion, describe_question_counts, evaluate, parse_jsonl
from ragaudit.index.store import scope_filter
from ragaudit.platform.db import Document, EvalDataset, EvalQuestion, EvalRun, QAPair, utcnow
from ragaudit.platform.llmcall import generation_failed, is_llm_failure
from ragaudit.retrieve.retriever import NO_RERANKER_ERROR
from ragaudit.services import Services
from ragaudit.types import Mode, Strategy

log = logging.getLogger(__name__)
GENERATED = "generated"


def import_dataset(svc: Services, name: str, text: str) -> dict[str, Any]:
    """Store a JSONL dataset under ``name`` (replacing a dataset of that name).

    Raises ``ValueError`` for an empty or reserved name, ``DatasetError`` (a ``ValueError``) naming
    every bad line and field of the file (``evaluation.parse_jsonl``)."""
    name = name.strip()
    if not name or name.startswith(GENERATED):
        raise ValueError("dataset name must be non-empty and not start with 'generated'")
    questions = parse_jsonl(text, name)
    with svc.sessions.begin() as s:
        old = s.scalar(select(EvalDataset).where(EvalDataset.name == name))
        if old is not None:
            s.execute(delete(EvalQuestion).where(EvalQuestion.dataset_id == old.id))
            s.delete(old)
            s.flush()
        ds = EvalDataset(name=name, source="upload", n_questions=len(questions))
        s.add(ds)
        s.flush()
        s.add_all(EvalQuestion(dataset_id=ds.id, position=i, record=q.raw) for i, q in enumerate(questions))
        return ds.as_dict()


def list_datasets(svc: Services) -> list[dict[str, Any]]:
    """Imported datasets, then the generated sets (all, per knowledge base, per document) with
    their question counts and, for generated sets, how their pairs break down: ``by_generator``,
    ``by_kind`` (labelled_value | table_cell | vote_table | sentence | llm | manual),
    ``by_answer_type`` and ``paraphrases`` (count)."""
    with svc.sessions() as s:
        out = [d.as_dict() for d in s.scalars(select(EvalDataset).order_by(EvalDataset.created_at.desc()))]
        rows = s.execute(
            select(
                Document.knowledge_base,
                Document.doc_name,
                QAPair.generator,
                QAPair.kind,
                QAPair.answer_type,
                QAPair.paraphrase,
                func.count(QAPair.id),
            )
            .join(QAPair, QAPair.document_id == Document.id)
            .group_by(
                Document.knowledge_base,
                Document.doc_name,
                QAPair.generator,
                QAPair.kind,
                QAPair.answer_type,
                QAPair.paraphrase,
            )
            .order_by(Document.knowledge_base, Document.doc_name)
        ).all()
    if not rows:
        return out
    groups: dict[str, dict[str, Any]] = {}

    def add(ref: str, gen: str, kind: str | None, atype: str | None, para: bool, n: int) -> None:
        g = groups.setdefault(
            ref,
            {
                "id": ref,
                "name": ref,
                "source": "generated",
                "n_questions": 0,
                "by_generator": {},
                "by_kind": {},
                "by_answer_type": {},
                "paraphrases": 0,
            },
        )
        g["n_questions"] += n
        for key, value in (
            ("by_generator", gen),
            ("by_kind", kind or "unknown"),
            ("by_answer_type", atype or "unknown"),
        ):
            g[key][value] = g[key].get(value, 0) + n
        g["paraphrases"] += n if para else 0

    for kb, doc, gen, kind, atype, para, n in rows:
        for ref in (GENERATED, f"{GENERATED}:{kb}", f"{GENERATED}:{kb}/{doc}"):
            add(ref, gen, kind, atype, bool(para), n)
    return out + list(groups.values())


def generated_questions(
    svc: Services, knowledge_base: str | None = None, doc_name: str | None = None
) -> list[GoldQuestion]:
    """The gold pairs generated at ingestion as questions (``kind: "generated"``; asked of the
    whole scope of the run), in document and page order."""
    q = (
        select(QAPair, Document.doc_name)
        .join(Document, Document.id == QAPair.document_id)
        .order_by(Document.doc_name, QAPair.page, QAPair.id)
    )
    if knowledge_base:
        q = q.where(Document.knowledge_base == knowledge_base)
    if doc_name:
        q = q.where(Document.doc_name == doc_name)
    with svc.sessions() as s:
        rows = s.execute(q).all()
    return [
        GoldQuestion(
            id=p.id,
            question=p.question,
            answer=p.answer,
            kind="generated",
            doc_name=name,
            page=p.page,
            evidence=p.evidence,
            raw={
                "generator": p.generator,
                "model": p.model,
                "chunk_id": p.chunk_id,
                "source_kind": p.kind,
                "answer_type": p.answer_type,
                "paraphrase": bool(p.paraphrase),
            },
        )
        for p, name in rows
    ]


def resolve_dataset(svc: Services, ref: str, *, files: bool = False) -> tuple[str, list[GoldQuestion]]:
    """``(name, questions)`` for a dataset reference (see module docstring): an imported
    dataset's id or name, ``generated[:KB[/DOC]]`` or, only when ``files`` is true, a JSONL file
    path. With ``files`` false the file system is never consulted.

    Raises ``KeyError`` when nothing matches (the same message whether or not a file of that
    name exists, unless ``files``) and ``ValueError`` for a malformed file or an empty generated
    set."""
    if ref == GENERATED or ref.startswith(GENERATED + ":"):
        rest = ref[len(GENERATED) + 1 :] if ":" in ref else ""
        kb, _, doc = rest.partition("/")
        qs = generated_questions(svc, kb or None, doc or None)
        if not qs:
            raise ValueError(f"dataset {ref!r} is empty: no gold pairs generated for that scope")
        return ref, qs
    if files:
        path = Path(ref)
        if path.is_file():
            return path.name, parse_jsonl(path.read_text(encoding="utf-8-sig"), str(path))
    with svc.sessions() as s:
        ds = s.get(EvalDataset, ref) or s.scalar(select(EvalDataset).where(EvalDataset.name == ref))
        if ds is None:
            if files:
                raise KeyError(f"dataset {ref!r} not found (neither a JSONL file nor an imported dataset)")
            raise KeyError(
                f"dataset {ref!r} not found: not the id or name of an imported dataset nor "
                "generated[:KB[/DOC]]; upload it with POST /datasets"
            )
        recs = list(
            s.scalars(
                select(EvalQuestion.record).where(EvalQuestion.dataset_id == ds.id).order_by(EvalQuestion.position)
            )
        )
        name = ds.name
    return name, [GoldQuestion.from_record(r, i, name) for i, r in enumerate(recs, 1)]


def create_run(svc: Services, dataset_ref: str, params: EvalParams, *, files: bool = False) -> str:
    """Validate the dataset reference and modes and record a ``queued`` run; returns its id.
    ``files``: the reference may be a JSONL file path (``resolve_dataset``; the CLI passes True,
    the HTTP API never does); recorded in the run's params as ``dataset_files`` so that
    ``execute_run`` resolves the reference the same way.
    Raises ``KeyError`` (unknown dataset) or ``ValueError`` (bad dataset, mode or strategy; a scope
    holding no chunk; no mode
    this server can run, e.g. ``hybrid_rerank`` alone without a reranker: other modes asked beside
    it run, and it is listed in the results' ``skipped_modes``).
    ``params.modes`` None is recorded as the modes the settings can run (``Settings.available_modes``)."""
    if params.modes is None:
        params = replace(params, modes=svc.settings.available_modes)
    modes = [Mode.parse(m).value for m in params.modes]
    unavailable = svc.settings.unavailable_modes
    if not any(m not in unavailable for m in modes):  # nothing left to run: refused now, not as a failed run
        raise ValueError(
            NO_RERANKER_ERROR if Mode.hybrid_rerank.value in modes else "modes: name at least one retrieval mode"
        )
    if params.strategy:
        Strategy.parse(params.strategy)
    scope = params.scope()
    if scope.as_dict() and not svc.store.count_matching(scope_filter(scope)):
        # every answer would be "Nothing was searched": refused now, not run as if it measured something
        raise ValueError(
            f"the run's scope {scope.as_dict()} holds no chunk: check the document names (GET /documents), "
            "the knowledge base and the strategy"
        )
    name, qs = resolve_dataset(svc, dataset_ref, files=files)
    with svc.sessions.begin() as s:
        run = EvalRun(
            dataset=dataset_ref if dataset_ref.startswith(GENERATED) else name,
            params={**params.to_json(), "dataset_ref": dataset_ref, "dataset_files": files},
            status="queued",
            progress_total=len(qs) * len(params.modes),
        )
        s.add(run)
        s.flush()
        return run.id


def run_error(e: BaseException) -> str:
    """The error a failed run shows (``GET /evaluate/{id}``): an LLM failure in /query's words
    (``generation_failed``: its kind and why, never the provider's message), any other exception
    as ``"<Class>: <message>"`` (ragaudit's own messages: a bad dataset, no mode to run)."""
    if is_llm_failure(e):
        return generation_failed(e)
    return f"{type(e).__name__}: {e}"[:4000]


def execute_run(svc: Services, run_id: str, query_service: Any = None, on_progress: Any = None) -> dict[str, Any]:
    """Run a recorded evaluation to the end, updating its progress, and store the results
    (``status: done``) or the error (``status: failed``, then re-raised). ``on_progress(done,
    total)``: also called after every question x mode (the CLI's progress bar)."""
    with svc.sessions.begin() as s:
        run = s.get(EvalRun, run_id)
        if run is None:
            raise KeyError(f"run {run_id} not found")
        run.status = "running"
        params = EvalParams.from_json(run.params)
        ref = run.params.get("dataset_ref", run.dataset)
        files = bool(run.params.get("dataset_files", False))

    def progress(done: int, total: int) -> None:
        with svc.sessions.begin() as s2:
            r = s2.get(EvalRun, run_id)
            r.progress_done, r.progress_total = done, total
        if on_progress is not None:
            on_progress(done, total)

    try:
        name, qs = resolve_dataset(svc, ref, files=files)
        results = evaluate(svc, qs, params, dataset_name=name, progress=progress, query_service=query_service)
        results["run_id"] = run_id
    except Exception as e:
        error = run_error(e)
        with svc.sessions.begin() as s:
            r = s.get(EvalRun, run_id)
            r.status, r.error, r.finished_at = "failed", error, utcnow()
        if is_llm_failure(e):  # the stack, not the provider's message (it can echo request data, a masked key)
            stack = "".join(traceback.format_tb(e.__traceback__, limit=5))
            log.error("evaluation run %s failed: %s\n%s", run_id, error, stack)
        else:
            log.error("evaluation run %s failed: %s", run_id, traceback.format_exc(limit=5))
        raise
    with svc.sessions.begin() as s:
        r = s.get(EvalRun, run_id)
        r.status, r.results, r.finished_at = "done", results, utcnow()
    return results


def start_run_thread(svc: Services, run_id: str, query_service: Any = None) -> threading.Thread:
    """Execute the run in a daemon thread (the API returns at once); failures end up in the run row."""

    def target() -> None:
        try:
            execute_run(svc, run_id, query_service)
        except Exception:  # already recorded as status=failed
            pass

    t = threading.Thread(target=target, name=f"eval-{run_id}", daemon=True)
    t.start()
    return t


def get_run(svc: Services, run_id: str) -> dict[str, Any]:
    """The run with its progress and, once done, its results. ``KeyError`` if unknown."""
    with svc.sessions() as s:
        r = s.get(EvalRun, run_id)
        if r is None:
            raise KeyError(f"run {run_id} not found")
        d = r.as_dict()
        if r.results:
            d["summary"] = summarize(r.results)
        return d


# what an auditor reads first: refusals, citations, and the concise answer's precision and coverage
SUMMARY_ANSWER_METRICS = (
    "f1",
    "exact_match",
    "refusal_accuracy",
    "citation_validity",
    "concise_precision",
    "concise_coverage",
    "faithfulness",
)


def summarize(results: dict[str, Any]) -> dict[str, Any]:
    """The main metrics of a finished run's ``results``: ``{n_questions, n_answerable,
    n_unanswerable, question_split, modes: {mode: retrieval metrics}, answers: {mode: {f1,
    exact_match, refusal_accuracy, citation_validity, concise_precision, concise_coverage,
    faithfulness}}, judge}`` (each mode's 95% intervals: ``GET /evaluate/{id}/intervals``).
    ``n_answerable``: the questions the retrieval metrics average over (each mode's ``n``);
    ``n_unanswerable``: the must-refuse ones, scored by refusal accuracy with the others;
    ``question_split``: the same in words (``evaluation.describe_question_counts``)."""
    ds = results.get("dataset") or {}
    n = int(ds.get("n_questions") or 0)
    refuse = int(ds.get("n_unanswerable", ds.get("n_refuse")) or 0)
    return {
        "n_questions": n,
        "n_answerable": n - refuse,
        "n_unanswerable": refuse,
        "question_split": describe_question_counts(n, refuse, bool(results.get("answers"))),
        "modes": results.get("modes"),
        "answers": {
            m: {k: v.get(k) for k in SUMMARY_ANSWER_METRICS} for m, v in (results.get("answers") or {}).items()
        },
        "judge": results.get("judge"),
    }


def list_runs(svc: Services, limit: int = 100) -> list[dict[str, Any]]:
    """Runs newest first, without their results, plus a summary of the main metrics when done."""
    with svc.sessions() as s:
        runs = list(s.scalars(select(EvalRun).order_by(EvalRun.created_at.desc()).limit(limit)))
        out = []
        for r in runs:
            d = r.as_dict(with_results=False)
            if r.results:
                d["summary"] = summarize(r.results)
            out.append(d)
        return out
