"""The API loads what the answerability gate defers (language profiles, word lists, place tables)
at startup, beside serving, so the first question does not wait for it."""

import json
import textwrap

from tests.conftest import fresh_python

PROBE = textwrap.dedent(
    """
    import json, sys
    from fastapi.testclient import TestClient
    from langdetect import detector_factory
    from ragaudit.answer import answerability
    from ragaudit.api.app import create_app
    from ragaudit.platform.settings import Settings

    def loaded():
        return [detector_factory._factory is not None, answerability._places.cache_info().currsize == 1]

    before = loaded()
    with TestClient(create_app(Settings(data_dir=sys.argv[1]))) as client:
        assert client.get("/health").status_code == 200
        client.app.state.warm_up.join(120)
        print(json.dumps({"before": before, "after": loaded()}))
    """
)


def test_the_api_warms_up_the_gate_at_startup(tmp_path):
    """Fails if the API does not load the gate's deferred language profiles and place tables when
    it starts (a fresh process, so nothing else has loaded them), or if importing the app loads
    them already (then every CLI command pays for them too)."""
    p = fresh_python(PROBE, str(tmp_path / "data"))
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    # [language profiles loaded, place tables loaded]: neither by the import, both by the startup
    assert got == {"before": [False, False], "after": [True, True]}, p.stdout
