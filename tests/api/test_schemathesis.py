"""Property-based API test: schemathesis generates requests for every operation in /openapi.json
(valid and invalid bodies, parameters, uploads) against the real app on a real knowledge base,
and checks each response: no 5xx, status code documented, body valid against the documented
schema, content type as documented. Bounded: a few examples per operation (~60 s in all)."""

from __future__ import annotations

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, Phase, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from ragaudit.api.app import create_app
from ragaudit.services import release_services
from tests.conftest import make_settings

_STATE: dict = {}


def _app():
    """One app for the whole module: the lifespan runs inside a TestClient held open by the fixture."""
    if "app" not in _STATE:
        import tempfile
        from pathlib import Path

        _STATE["dir"] = tempfile.TemporaryDirectory(prefix="schemathesis-")
        _STATE["settings"] = make_settings(Path(_STATE["dir"].name) / "data", cache_ttl_s=0)
        _STATE["app"] = create_app(_STATE["settings"])
    return _STATE["app"]


schema = schemathesis.openapi.from_asgi("/openapi.json", _app())


@pytest.fixture(scope="module", autouse=True)
def running_app():
    """Lifespan started (services, telemetry) for the generated calls; stopped after the module.

    schemathesis' ASGI client starts the app's lifespan a second time (at collection, loading
    /openapi.json) and keeps it until the interpreter exits: it is shut down here, before the
    data folder is deleted, or its ingestion worker goes on polling a deleted database."""
    from schemathesis.python.asgi import shutdown_lifespans

    with TestClient(_app()):
        yield
    shutdown_lifespans()
    release_services(_STATE["settings"])
    _STATE["dir"].cleanup()


@schema.parametrize()
@settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_every_operation_conforms(case):
    """Fails on any 5xx, an undocumented status code, a body that violates its documented schema,
    a wrong content type or an ``Allow`` header missing a method (schemathesis' default checks).

    Excluded: ``positive_data_acceptance``, which wants every schema-valid request accepted; the
    API rightly refuses some with a documented 400/422 for reasons a schema cannot state (mode
    hybrid_rerank with no cross-encoder configured, an empty dataset file)."""
    case.call_and_validate(excluded_checks=[positive_data_acceptance])
