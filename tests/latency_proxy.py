"""A local HTTP server that adds a fixed delay to every request (a far-away object store on one machine), and
counts requests and how many were in flight at once. Used by tests/test_remote.py and bench/remote_latency.py.

    with LatencyProxy("http://127.0.0.1:8000", delay_s=0.1) as proxy:  # forwards to a server
        ...  # read proxy.url; then proxy.requests, proxy.max_in_flight
    with LatencyProxy("/srv/www", delay_s=0.1) as proxy:  # serves a folder itself
        ...

Like an object store's endpoint it keeps connections alive (HTTP/1.1) and accepts many connections at once (a
listen backlog of 1024: Python's default of 5 drops connection attempts beyond it, and each dropped one costs
the client a 1 s SYN retransmission, which is no latency a real store adds).
"""

from __future__ import annotations

import http.client
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "upgrade", "te", "trailer"}


class _Server(ThreadingHTTPServer):
    request_queue_size = 1024
    daemon_threads = True


class LatencyProxy:
    """Answers GET and HEAD after `delay_s` seconds, one thread per connection: forwarded to `upstream`
    (http://host:port) or read from the folder `upstream`. `log`: a file that gets one line per request,
    ``start end method path`` (seconds since the proxy started)."""

    def __init__(self, upstream: str, delay_s: float = 0.1, log: str | None = None) -> None:
        self.folder = None if "://" in upstream else Path(upstream)
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.delay_s = delay_s
        self.requests = 0
        self.max_in_flight = 0
        self._in_flight = 0
        self._lock = threading.Lock()
        self._log = open(log, "a", buffering=1) if log else None  # noqa: SIM115 - closed in __exit__
        self._t0 = time.perf_counter()
        self._server = _Server(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> LatencyProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._log is not None:
            self._log.close()

    def _enter(self) -> None:
        with self._lock:
            self.requests += 1
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)

    def _leave(self, method: str, path: str, start: float) -> None:
        with self._lock:
            self._in_flight -= 1
            if self._log is not None:
                now = time.perf_counter()
                self._log.write(f"{start - self._t0:.3f} {now - self._t0:.3f} {method} {path}\n")

    def _answer(self, method: str, path: str, headers: dict[str, str]) -> tuple[int, list[tuple[str, str]], bytes]:
        """(status, headers, body) of the request, from the folder or the upstream server."""
        if self.folder is not None:
            file = (self.folder / unquote(urlsplit(path).path).lstrip("/")).resolve()
            if self.folder.resolve() not in file.parents or not file.is_file():
                return 404, [], b""
            return 200, [("Content-Type", "application/octet-stream")], file.read_bytes()
        conn = http.client.HTTPConnection(*self.upstream, timeout=30)
        try:
            conn.request(method, path, headers=headers)
            reply = conn.getresponse()
            return reply.status, reply.getheaders(), reply.read()
        finally:
            conn.close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as object stores do

            def log_message(self, *args: Any) -> None:
                pass

            def _forward(self, method: str) -> None:
                proxy._enter()
                start = time.perf_counter()
                try:
                    time.sleep(proxy.delay_s)  # the round trip to a far-away store
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_HEADERS | {"host"}}
                    status, reply_headers, body = proxy._answer(method, self.path, headers)
                    self.send_response(status)
                    for key, value in reply_headers:
                        if key.lower() not in HOP_HEADERS | {"content-length"}:
                            self.send_header(key, value)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    if method != "HEAD":
                        self.wfile.write(body)
                finally:
                    proxy._leave(method, self.path, start)

            def do_GET(self) -> None:  # noqa: N802 - the http.server spelling
                self._forward("GET")

            def do_HEAD(self) -> None:  # noqa: N802
                self._forward("HEAD")

        return Handler


if __name__ == "__main__":  # python tests/latency_proxy.py UPSTREAM|FOLDER [DELAY_S [LOG]]: prints its URL, serves
    import sys

    with LatencyProxy(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 0.1,
                      sys.argv[3] if len(sys.argv) > 3 else None) as running:
        print(running.url, flush=True)
        threading.Event().wait()
