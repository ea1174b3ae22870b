"""A Tinker server over rlvr on a free port, for the unmodified `tinker` SDK."""

import signal

import pytest

LIMIT_S = 240  # a test that hangs (a server that stopped answering: the SDK retries for minutes) fails here


@pytest.fixture(autouse=True)
def time_limit():
    def expire(signum, frame):
        raise TimeoutError(f"a tinker test ran past {LIMIT_S} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(LIMIT_S)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def served(tmp_path, monkeypatch):
    """(base URL, the server) of an in-process `rlvr serve --tinker`, its checkpoints under tmp_path/root."""
    pytest.importorskip("tinker")
    from rlvr.tinker.server import started

    monkeypatch.setenv("TINKER_TELEMETRY", "0")
    server = started(tmp_path / "root")
    yield server.url, server
    server.shutdown()
    server.close(wait=True)


@pytest.fixture
def client(served):
    """A ServiceClient of the tinker SDK on the served URL, as its docs make one (the key only has its form); closed
    after the test, before its server stops (else its session's heartbeat goes on failing in the process)."""
    import tinker

    with tinker.ServiceClient(base_url=served[0], api_key="tml-local") as client:
        yield client
