"""`rlvr dashboard RUN_DIR [RUN_DIR ...]`: a local page that follows runs while they train.

The pages are rendered on the server from the run directories at every request (the same escaped
HTML as `rlvr report`) and reload themselves every few seconds; the only script is the explorer's,
which resubmits its form on every change (the numbers themselves come from the server):
    /              every run's metrics overlaid, one chart per metric (?x=time: against wall-clock)
    /run/<i>       run i's full report; ?step=N shows only the groups recorded at step N
    /explore       the GRPO explorer (dashboard/explorer.py)
Security: bound to 127.0.0.1 unless --allow-remote; requests whose Host header is not this
server's own name are refused (DNS rebinding); nothing outside those two pages is served.
"""

from __future__ import annotations

import errno
import ipaddress
import threading
from html import escape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from rlvr.dashboard.charts import CHART_CSS, line_chart
from rlvr.dashboard.explorer import explorer_page
from rlvr.dashboard.report import CHARTS, X_AXES, number, render, x_values
from rlvr.dashboard.run_data import read_run
from rlvr.errors import UserError

REFRESH_SECONDS = 5
IDLE_SECONDS = 30  # a connection silent this long is closed
# No maths here: the server computes every number; this only asks for the page again after each edit.
EXPLORE_JS = ("document.querySelectorAll('form input, form select')"
              ".forEach(e => e.addEventListener('change', () => e.form.submit()));\n")


def overview(runs: list[Path], x: str = "step") -> str:
    """Every run's metrics, overlaid: one chart per metric, one line per run; x = step or time (wall-clock)."""
    data = [read_run(r) for r in runs]
    links = "".join(f'<li><a href="/run/{i}">{escape(str(d.path))}</a>{_problems(d.problems)}</li>'
                    for i, d in enumerate(data))
    charts = []
    for title, keys in CHARTS.items():
        for key in keys:
            series = {f"{i}: {d.path.name}": dict(zip(x_values(d.metrics, x), (m.get(key) for m in d.metrics)))
                      for i, d in enumerate(data)}
            xs = sorted({s for values in series.values() for s in values if isinstance(s, (int, float))})
            if any(key in m for d in data for m in d.metrics):
                lines = {n: [number(v.get(s)) for s in xs] for n, v in series.items()}
                charts.append(line_chart(f"{title}: {key}", xs, lines, x_label=X_AXES[x]))
    axis = ('<a href="/?x=time">against wall-clock</a>' if x == "step" else '<a href="/">against step</a>')
    return _page("rlvr dashboard", f"<h1>rlvr dashboard</h1><p><a href=\"/explore\">GRPO explorer</a> · {axis}</p>"
                                   f"<ul>{links}</ul><div class=\"charts\">{''.join(charts)}</div>")


def run_page(path: Path, step: int | None) -> str:
    run = read_run(path)
    if step is not None:
        run.groups = [g for g in run.groups if g.get("step") == step]
    html = render(run)
    return html.replace("<head>", f'<head><meta http-equiv="refresh" content="{REFRESH_SECONDS}">', 1)


def allowed_hosts(host: str, port: int) -> set[str]:
    """The Host header values this server answers to.

    >>> sorted(allowed_hosts("127.0.0.1", 8765))
    ['127.0.0.1:8765', '[::1]:8765', 'localhost:8765']
    """
    names = {host} | ({"127.0.0.1", "localhost", "[::1]"} if _loopback(host) else set())
    return {f"{name}:{port}" for name in names}


class _DashboardServer(ThreadingHTTPServer):
    allowed: set[str]  # the Host headers it answers to (`allowed_hosts`), set by `make_server`


def make_server(runs: list[Path], host: str = "127.0.0.1", port: int = 8765,
                allow_remote: bool = False) -> ThreadingHTTPServer:
    if not _loopback(host) and not allow_remote:
        raise UserError(f"binding to {host} exposes the runs to the network: add --allow-remote if that is intended")
    missing = [r for r in runs if not r.is_dir()]
    if missing:
        raise UserError(f"{missing[0]} is not a directory: give run directories made by rlvr train")
    try:
        server = _DashboardServer((host, port), _handler(runs))
    except OSError as e:  # in use, not allowed (a port below 1024), or an address this machine does not have
        raise UserError(f"cannot listen on {host}:{port}: {e.strerror or e}; pass another --port "
                        "(--port 0 picks a free one)" + ("" if e.errno == errno.EADDRINUSE else " or --host")) from None
    server.allowed = allowed_hosts(host, server.server_address[1])  # port 0 picks a free one
    return server


def serve(runs: list[Path], host: str, port: int, allow_remote: bool, page: str = "/") -> None:
    server = make_server(runs, host, port, allow_remote)
    print(f"rlvr dashboard on http://{host}:{server.server_address[1]}{page} (Ctrl-C to stop)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def start_in_background(server: ThreadingHTTPServer) -> threading.Thread:
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return thread


def _handler(runs: list[Path]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        timeout = IDLE_SECONDS  # a connection that sends nothing is closed, not held by a thread forever
        server: _DashboardServer

        def do_GET(self) -> None:
            if self.headers.get("Host") not in self.server.allowed:
                return self._send(403, _page("refused", "<p>Unknown Host header: "
                                                        "this server only answers to its own name.</p>"))
            url = urlsplit(self.path)
            if url.path == "/":
                x = "time" if parse_qs(url.query).get("x") == ["time"] else "step"
                return self._send(200, overview(runs, x))
            if url.path == "/explore":
                return self._send(200, explorer_page(parse_qs(url.query)))
            if url.path == "/explore.js":  # the explorer's only script: resubmit the form on every change
                return self._send(200, EXPLORE_JS, "text/javascript")
            parts = url.path.strip("/").split("/")
            if len(parts) == 2 and parts[0] == "run" and parts[1].isdigit() and int(parts[1]) < len(runs):
                step = parse_qs(url.query).get("step", [""])[0]
                return self._send(200, run_page(runs[int(parts[1])], int(step) if step.isdigit() else None))
            return self._send(404, _page("not found", "<p>Not found.</p>"))

        def _send(self, status: int, text: str, kind: str = "text/html") -> None:
            body = text.encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", f"{kind}; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            # the only script a page may load is /explore.js; nothing inline, nothing from elsewhere
            self.send_header("Content-Security-Policy",
                             "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; form-action 'self'")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:  # quiet: the terminal belongs to the user
            pass

    return Handler


def _page(title: str, body: str) -> str:
    return (f'<!DOCTYPE html><html><head><meta charset="utf-8"><meta http-equiv="refresh" content="{REFRESH_SECONDS}">'
            f"<title>{escape(title)}</title><style>body{{font-family:sans-serif;max-width:1100px;margin:auto}} "
            f".charts{{display:flex;flex-wrap:wrap;gap:8px}} {CHART_CSS}</style></head><body>{body}</body></html>")


def _problems(problems: list[str]) -> str:
    return "".join(f" <em>{escape(p)}</em>" for p in problems)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
