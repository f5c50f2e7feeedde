"""Internal endpoints for the Dagster processes (not for users): the run launcher of the
embedded mode hands runs to this process, which owns the Qdrant folder."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, status
from pydantic import BaseModel, Field

from ragaudit.pipelines.runner import instance_for

from ..deps import IngestQueueDep, RequireWriteKey, ServicesDep
from ..schemas import ErrorOut

router = APIRouter(prefix="/internal", tags=["internal"])


class RunIn(BaseModel):
    run_id: str = Field(min_length=1, max_length=64, pattern=r"^[0-9a-fA-F-]+$")


class RunAccepted(BaseModel):
    run_id: str
    queued_before: int = Field(description="Runs and uploads waiting or running ahead of this one")


@router.post(
    "/dagster/runs",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=RunAccepted,
    dependencies=[RequireWriteKey],
    responses={400: {"model": ErrorOut}, 404: {"model": ErrorOut}},
)
def accept_run(body: RunIn, svc: ServicesDep, jobs: IngestQueueDep) -> RunAccepted:
    """Queue a Dagster run (created by the webserver or daemon) for execution in this process
    (``ragaudit.pipelines.launcher.StoreOwnerRunLauncher``). 404 if the shared Dagster instance does not
    know the run (the Dagster processes use another ``DAGSTER_HOME``)."""

    if instance_for(svc).get_run_by_id(body.run_id) is None:
        raise HTTPException(
            404,
            f"run {body.run_id} is not in this process's Dagster instance: "
            "start the Dagster webserver and daemon with the same DAGSTER_HOME",
        )
    ahead = jobs.pending()
    jobs.submit_run(body.run_id)
    return RunAccepted(run_id=body.run_id, queued_before=ahead)
