"""`rlvr dashboard`: the live pages, the Host check, loopback by default, nothing else served."""

import http.client
import json
import re

import pytest

from rlvr.dashboard.server import make_server, start_in_background
from rlvr.errors import UserError
from rlvr.grpo.trainer import train_grpo

from ..train.test_step import DIGITS, tiny_config


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    dirs = []
    for name in ("a", "b"):
        tmp = tmp_path_factory.mktemp(name)
        train_grpo(tiny_config(tmp, DIGITS, "sample_every=1", f"seed={len(dirs)}", steps=2))
        dirs.append(tmp / "run")
    return dirs


@pytest.fixture(scope="module")
def server(runs):
    server = make_server(runs, port=0)
    start_in_background(server)
    yield server
    server.shutdown()
    server.server_close()


def get(server, path, host=None):
    port = server.server_address[1]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", path, headers={"Host": host or f"127.0.0.1:{port}"})
    response = conn.getresponse()
    return response.status, response.read().decode()


def test_the_overview_overlays_every_run(server, runs):
    status, html = get(server, "/")
    assert status == 200 and 'http-equiv="refresh"' in html
    for i, run in enumerate(runs):
        metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        found = re.search(rf'data-series="{i}: run" data-values="([^"]*)"',
                          html.partition("reward and accuracy: reward/mean")[2])
        assert [float(v) for v in found.group(1).split()] == pytest.approx([m["reward/mean"] for m in metrics])


def test_a_run_page_filters_groups_by_step(server):
    status, html = get(server, "/run/1?step=2")
    assert status == 200 and "<h3>step 2</h3>" in html and "<h3>step 1</h3>" not in html


def test_foreign_hosts_and_other_paths_are_refused(server):
    assert get(server, "/", host="evil.example:80")[0] == 403  # DNS rebinding
    assert get(server, "/", host=f"localhost:{server.server_address[1]}")[0] == 200
    for path in ("/run/7", "/../../etc/passwd", "/run/0/../../x", "/api"):
        assert get(server, path)[0] == 404


def test_binding_beyond_loopback_needs_the_explicit_flag(runs):
    with pytest.raises(UserError, match="--allow-remote"):
        make_server(runs, host="0.0.0.0", port=0)
    with pytest.raises(UserError, match="not a directory"):
        make_server([runs[0].parent / "missing"], port=0)


def test_the_explorer_shows_the_trainers_own_advantages(server):
    import random
    from urllib.parse import urlencode

    import torch

    from rlvr.advantages import group_advantages

    status, html = get(server, "/explore")  # the 23 x 17 example group
    assert status == 200 and "0.625" in html and "+0.77" in html and "-1.29" in html and "23 × 17 = 381" in html
    rng = random.Random(0)
    for _ in range(5):
        g = rng.randint(2, 12)
        rewards = [round(rng.uniform(-1, 2), 3) for _ in range(g)]
        options = {"baseline": rng.choice(["group_mean", "leave_one_out"]), "scale": rng.choice(["group_std", "none"]),
                   "std_estimator": rng.choice(["population", "unbiased"])}
        query = urlencode({"g": g, **{f"r{i}": r for i, r in enumerate(rewards)}, **options})
        status, html = get(server, f"/explore?{query}")
        shown = [float(v) for v in re.findall(r'<td class="adv" data-index="\d+">([^<]*)</td>', html)]
        expected = group_advantages(torch.tensor([rewards]), **options)[0].tolist()
        assert shown == pytest.approx(expected, abs=0.006)  # shown to two decimals


def test_malformed_explorer_input_falls_back_to_the_example(server):
    status, html = get(server, "/explore?g=3&r0=nan&r1=x&scale=<script>")
    assert status == 200 and "<script>" not in html and "0.625" in html


def test_a_port_in_use_is_one_line_naming_it_and_the_fix():
    first = make_server([], port=0)
    try:
        port = first.server_address[1]
        with pytest.raises(UserError) as e:
            make_server([], port=port)
        assert str(e.value).startswith(f"cannot listen on 127.0.0.1:{port}: Address already in use; pass another "
                                       "--port (--port 0 picks a free one)")
    finally:
        first.server_close()


def test_an_idle_connection_is_closed_not_held_forever(monkeypatch):
    import socket

    import rlvr.dashboard.server as module

    monkeypatch.setattr(module, "IDLE_SECONDS", 0.5)
    server = make_server([], port=0)
    start_in_background(server)
    try:
        idle = socket.create_connection(server.server_address, timeout=10)  # a hang fails in 10 s
        assert idle.recv(1) == b""  # the server hung up on a connection that sent nothing
        idle.close()
    finally:
        server.shutdown()
        server.server_close()


def test_runs_with_rows_and_values_of_the_wrong_kind_are_shown(tmp_path):
    """A metrics row whose step is not a number (and the other bad rows of bad_runs): every page answers,
    the overview names what it skipped, instead of the server dropping the connection."""
    from .bad_runs import PROBLEMS, write_bad_runs

    runs = write_bad_runs(tmp_path)
    server = make_server(list(runs.values()), port=0)
    start_in_background(server)
    try:
        for path in ("/", "/?x=time", "/run/0", "/run/0?step=1", "/run/1", "/run/1?step=1"):
            status, html = get(server, path)
            assert status == 200 and "</html>" in html, path
        overview = get(server, "/")[1].replace("&quot;", '"')
        assert all(problem in overview for problem in PROBLEMS)
        assert 'data-series="0: rows" data-values="0.5 nan nan"' in overview.partition("reward/mean")[2]
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("clip", [0.01, 0.2, 0.5])
def test_the_explorers_step_moves_each_ratio_no_further_than_the_clip_lets_it(clip):
    """The page said "at most 1.01×" beside a completion moved 1.53× whatever ε was: the step ignored the clip."""
    from rlvr.dashboard.explorer import EXAMPLE_GROUP, explore

    for rewards in (list(EXAMPLE_GROUP.values()), [1.0, 0.0, 0.0], [3.0, 1.0, 0.5, 0.5, -2.0]):
        e = explore(rewards, clip=clip)
        assert sum(e.after) == pytest.approx(1.0)
        for a, before, after in zip(e.advantages, e.before, e.after):
            ratio = after / before
            assert (ratio <= 1 + clip + 1e-9) if a > 0 else (ratio >= 1 - clip - 1e-9) if a < 0 else True
    wide, narrow = explore([1.0, 0.0, 0.0], clip=0.5), explore([1.0, 0.0, 0.0], clip=0.01)
    assert wide.after[0] > narrow.after[0] == pytest.approx(1.01 / 3)  # (the clip binds: ε decides the step)
