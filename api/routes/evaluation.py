"""Gold datasets and evaluation runs: ``POST/GET /datasets``, ``POST/GET /evaluate``.

``POST /evaluate`` records a run and executes it in a background thread, returning its id at
once (202); ``GET /evaluate/{run_id}`` shows the progress, then the results JSON documented in
``ragaudit.evaluate.evaluation`` (the same document ``ragaudit eval --json`` prints) and its
summary (``RunSummaryOut``).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, File, Form, HTTPException, UploadFile, status
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, Field

from ragaudit.evaluate import runs as evalruns
from ragaudit.evaluate.evaluation import DatasetError, EvalParams
from ragaudit.types import Strategy

from ..deps import QueryServiceDep, RequirePaidKey, RequireReadKey, RequireWriteKey, ServicesDep
from ..schemas import ErrorOut

router = APIRouter(tags=["evaluation"], dependencies=[RequireReadKey])


class DatasetOut(BaseModel):
    id: str
    name: str
    source: str = Field(description="upload | generated")
    n_questions: int
    created_at: str | None = None
    by_generator: dict[str, int] | None = Field(default=None, description="Generated sets: pairs per generator")
    by_kind: dict[str, int] | None = Field(
        default=None,
        description="Generated sets: pairs per source (labelled_value, table_cell, vote_table, sentence, llm)",
    )
    by_answer_type: dict[str, int] | None = Field(default=None, description="Generated sets: pairs per answer type")
    paraphrases: int | None = Field(default=None, description="Generated sets: pairs whose question is a paraphrase")


class EvaluateIn(BaseModel):
    """An evaluation request: a dataset (imported name or id, or ``generated[:KB[/DOC]]``; never a
    server file path), the scope (knowledge base, documents, chunking strategy), modes and ``top_k``."""

    dataset: str = Field(
        min_length=1,
        description="Id or name of a dataset imported with POST /datasets, or generated[:KB[/DOC]]; "
        "a file path is not read (404 unless it is an imported dataset's name)",
    )
    modes: list[str] | None = Field(
        default=None,
        description="Retrieval modes to compare; default: every mode the server can run (GET /modes: "
        "hybrid_rerank only with a reranker configured). hybrid_rerank asked for without a reranker is "
        "skipped with a note beside other modes, and refused (400) alone",
    )
    top_k: int | None = Field(default=None, ge=1, le=100, description="Sources per answer (default: settings)")
    answers: bool = Field(default=True, description="False = retrieval metrics only")
    strategy: Strategy | None = Field(default=None, description="fixed | sentence | heading | semantic")
    knowledge_base: str | None = None
    doc_names: list[str] = Field(default_factory=list)

    def params(self) -> EvalParams:
        return EvalParams(
            modes=self.modes,
            top_k=self.top_k,
            answers=self.answers,
            strategy=self.strategy.value if self.strategy else None,
            knowledge_base=self.knowledge_base,
            doc_names=self.doc_names,
        )


class RunSummaryOut(BaseModel):
    """The main numbers of a finished run (the full document is ``results``)."""

    n_questions: int = Field(description="Questions in the dataset, all kinds")
    n_answerable: int = Field(
        description="Questions with evidence to retrieve (every kind but refuse): the retrieval metrics of "
        "`modes` are means over these"
    )
    n_unanswerable: int = Field(
        description="Must-refuse questions (kind refuse): left out of the retrieval metrics; refusal accuracy "
        "scores them together with the answerable ones"
    )
    question_split: str = Field(
        description="The three counts in words, e.g. '12 questions: 11 answerable (retrieval metrics), "
        "1 must-refuse (refusal accuracy covers all 12)'"
    )
    modes: dict[str, dict[str, Any]] | None = Field(
        description="Retrieval metrics per mode (hit@1, hit@5, hit@10, mrr, ndcg@10, evidence_recall@5, "
        "evidence_recall@10); `n`: the questions they average over, n_answerable"
    )
    answers: dict[str, dict[str, Any]] = Field(
        description="Answer metrics per mode (f1, exact_match, refusal_accuracy over all questions, "
        "citation_validity, concise_precision (right when shown), concise_coverage (shown / answerable), "
        "faithfulness); empty for a retrieval-only run. Each mode's 95% intervals: GET /evaluate/{id}/intervals"
    )
    judge: str | None = Field(
        description="deterministic, or the litellm model that judged the answers; null for a retrieval-only run"
    )


class RunOut(BaseModel):
    id: str
    dataset: str
    params: dict[str, Any]
    status: str = Field(description="queued | running | done | failed")
    progress: dict[str, int]
    error: str | None = None
    created_at: str | None = None
    finished_at: str | None = None
    results: dict[str, Any] | None = None
    summary: RunSummaryOut | None = Field(default=None, description="A finished run's main numbers")


@router.post(
    "/datasets",
    status_code=status.HTTP_201_CREATED,
    dependencies=[RequireWriteKey],
    response_model=DatasetOut,
    responses={400: {"model": ErrorOut}, 413: {"model": ErrorOut}, 422: {"model": ErrorOut}},
)
async def upload_dataset(svc: ServicesDep, file: UploadFile = File(...), name: str = Form("")) -> DatasetOut:
    """Import a JSONL gold set in the dev-set format (one question record per line, UTF-8 with or
    without a byte-order mark; fields and types: ``ragaudit.evaluate.evaluation.GoldRecord``). The
    name defaults to the file name; uploading a name again replaces that dataset.

    Every line is checked before anything is stored: a bad line (malformed JSON, not an object, a
    field of the wrong type or value, a repeated id) gets 422 whose ``detail`` lists each problem
    as ``{type, loc: ["body", "file", line, field...], msg, input}``. 400 for a bad name or a file
    that is not UTF-8, 413 above 20 MB."""
    data = await file.read(20 * 1024 * 1024 + 1)
    if len(data) > 20 * 1024 * 1024:
        raise HTTPException(413, "dataset too large: limit is 20 MB")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise HTTPException(400, f"file: not UTF-8 text (invalid byte at offset {e.start})") from None
    try:
        ds = await run_in_threadpool(evalruns.import_dataset, svc, name or (file.filename or "dataset.jsonl"), text)
    except DatasetError as e:
        raise HTTPException(422, [{**err, "loc": ["body", "file", *err["loc"]]} for err in e.errors]) from None
    except ValueError as e:
        raise HTTPException(400, str(e)) from None
    return DatasetOut(**ds)


class ModesOut(BaseModel):
    available: list[str] = Field(description="Retrieval modes this server can run (the default of POST /evaluate)")
    unavailable: dict[str, str] = Field(description="Mode -> why it cannot run and the setting that enables it")


@router.get("/modes", response_model=ModesOut)
def list_modes(svc: ServicesDep) -> ModesOut:
    """The retrieval modes this server's settings can run, and the others with the reason."""
    return ModesOut(available=svc.settings.available_modes, unavailable=svc.settings.unavailable_modes)


@router.get("/datasets", response_model=list[DatasetOut])
def list_datasets(svc: ServicesDep) -> list[DatasetOut]:
    """Imported datasets and the gold sets generated at ingestion (all, per knowledge base, per document)."""
    return [DatasetOut(**d) for d in evalruns.list_datasets(svc)]


@router.post(
    "/evaluate",
    status_code=status.HTTP_202_ACCEPTED,
    dependencies=[RequirePaidKey],
    response_model=RunOut,
    responses={400: {"model": ErrorOut}, 404: {"model": ErrorOut}},
)
def start_evaluation(body: EvaluateIn, svc: ServicesDep, qs: QueryServiceDep) -> RunOut:
    """Start an evaluation run in the background and return it (status ``queued``) at once.

    404 (``detail``: "dataset '...' not found: ... upload it with POST /datasets") when
    ``dataset`` is neither an imported dataset nor a generated set; a server file path is never
    opened, so the answer is the same whether or not such a file exists. 400 for an empty
    generated set, an unknown mode or strategy, or no mode this server can run
    (``hybrid_rerank`` alone without a reranker: the message of /query)."""
    try:
        run_id = evalruns.create_run(svc, body.dataset, body.params(), files=False)
    except KeyError as e:
        raise HTTPException(404, e.args[0]) from None
    except ValueError as e:
        raise HTTPException(400, str(e)) from None
    evalruns.start_run_thread(svc, run_id, qs)
    return RunOut(**evalruns.get_run(svc, run_id))


@router.get("/evaluate", response_model=list[RunOut])
def list_evaluations(svc: ServicesDep, limit: int = 100) -> list[RunOut]:
    """Runs, newest first, with their status, progress and a summary of the main metrics."""
    return [RunOut(**r) for r in evalruns.list_runs(svc, min(max(limit, 1), 1000))]


@router.get("/evaluate/{run_id}", response_model=RunOut, responses={404: {"model": ErrorOut}})
def get_evaluation(run_id: str, svc: ServicesDep) -> RunOut:
    """A run: progress while it runs, then its results JSON (``results``)."""
    try:
        return RunOut(**evalruns.get_run(svc, run_id))
    except KeyError as e:
        raise HTTPException(404, e.args[0]) from None
