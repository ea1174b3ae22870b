"""`rlvr serve --tinker` from the command line: it says where it listens, serves the SDK, and stops on SIGTERM."""

import os
import re
import signal
import subprocess
import sys

import pytest


def test_rlvr_serve_tinker_serves_the_sdk_and_stops_on_sigterm(tmp_path):
    tinker = pytest.importorskip("tinker")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TINKER_TELEMETRY": "0"}
    server = subprocess.Popen([sys.executable, "-m", "rlvr", "serve", "--tinker", "--port", "0", "--dir",
                               str(tmp_path / "ckpt")], stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = server.stderr.readline()
        url = re.search(r"on (http://127\.0\.0\.1:\d+)", line).group(1)
        with tinker.ServiceClient(base_url=url, api_key="tml-local") as client:  # (closed: no heartbeat left)
            tc = client.create_lora_training_client(base_model="tiny", rank=2).result()
            saved = tc.save_state("first").result().path
        assert (tmp_path / "ckpt" / tc.model_id / "weights" / "first" / "state.pt").is_file()
        assert saved == f"tinker://{tc.model_id}/weights/first"
    finally:
        server.send_signal(signal.SIGTERM)
        _, err = server.communicate(timeout=60)
    assert server.returncode == 128 + signal.SIGTERM and "Traceback" not in err  # (143: the shell's convention)


def test_rlvr_serve_without_a_protocol_is_one_line():
    done = subprocess.run([sys.executable, "-m", "rlvr", "serve"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "give --tinker" in done.stderr and "Traceback" not in done.stderr


def test_a_service_client_from_python_needs_no_server_started(tmp_path):
    pytest.importorskip("tinker")
    from rlvr.tinker import service_client

    tc = service_client(tmp_path / "runs").create_lora_training_client(base_model="tiny", rank=2).result()
    assert tc.get_info().model_data.model_name == "tiny"
    assert tc.save_state("s").result().path == f"tinker://{tc.model_id}/weights/s"
    assert (tmp_path / "runs" / tc.model_id / "weights" / "s" / "state.pt").is_file()
    assert tc.save_state("s").result().path.endswith("/weights/s")  # (saved again: the new one in its place)
    assert [p.name for p in (tmp_path / "runs" / tc.model_id / "weights").iterdir()] == ["s"]


@pytest.mark.parametrize(("args", "said"), [
    (["--host", "999.1.1.1"], "(give another --host)"),  # (the resolver's words vary)
    (["--alias", "foo=/no/such/model"], "--alias: model path not found: /no/such/model"),
])
def test_a_host_it_cannot_bind_and_an_alias_to_no_model_are_one_line_at_start(tmp_path, capsys, args, said):
    pytest.importorskip("tinker")
    from rlvr.cli import main

    assert main(["serve", "--tinker", "--port", "0", "--dir", str(tmp_path / "ckpt"), *args]) == 2
    assert said in capsys.readouterr().err
