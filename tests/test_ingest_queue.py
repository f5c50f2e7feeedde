"""Which lane of the serving process's ingestion queue may take which waiting item
(``ragaudit.ingest.queue``): the scheduling rules, on the queue's own state, without threads."""

from __future__ import annotations

from ragaudit.ingest.queue import EXPRESS, MAIN, IngestQueue
from ragaudit.services import get_services, release_services
from tests.conftest import make_settings


def test_a_handed_dagster_run_runs_alone_and_in_its_turn(tmp_path):
    """A Dagster run handed over by the launcher (``run:<id>``) may touch any document: the main
    lane does not take it while the express lane runs a document, takes no document queued
    behind it meanwhile, and the express lane takes nothing while it runs or waits ahead; short
    documents queued before it still go to the express lane. Fails if a handed run (a Materialize
    click, "Execute checks") can run beside an express-lane run of the same document, or if
    documents overtake it."""
    settings = make_settings(tmp_path / "data", queue_express_pages=5)
    try:
        q = IngestQueue(get_services(settings), runner=lambda *a: None, run_executor=lambda *a: None)

        def pick(lane: str) -> str | None:  # what the lane's thread takes next (IngestQueue._next)
            return next((i for i in q._waiting if q._eligible(i, lane)), None)

        q._pages = {"short1": 2, "short2": 3, "long": 30}
        q._waiting = ["short1", "run:r1", "short2", "long"]
        q._running = {EXPRESS: "short0"}
        assert pick(EXPRESS) == "short1"  # queued before the run
        assert pick(MAIN) == "short1"  # the run waits for the express lane; nothing behind it overtakes it
        q._waiting = ["run:r1", "short2", "long"]
        assert pick(MAIN) is None and pick(EXPRESS) is None
        q._running = {}
        assert pick(MAIN) == "run:r1" and pick(EXPRESS) is None
        q._waiting, q._running = ["short2", "long"], {MAIN: "run:r1"}
        assert pick(EXPRESS) is None and pick(MAIN) == "short2"
        q._running = {MAIN: "long0"}
        assert pick(EXPRESS) == "short2"  # an ordinary long run: short documents go beside it
    finally:
        release_services(settings)
