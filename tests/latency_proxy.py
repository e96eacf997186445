"""A local HTTP proxy that adds a fixed delay to every request (a far-away object store on one machine), and
counts requests and how many were in flight at once. Used by tests/test_remote.py and bench/remote_latency.py.

    with LatencyProxy("http://127.0.0.1:8000", delay_s=0.1) as proxy:
        ...  # read proxy.url; then proxy.requests, proxy.max_in_flight
"""

from __future__ import annotations

import http.client
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "upgrade", "te", "trailer"}


class LatencyProxy:
    """Forwards GET and HEAD to `upstream` (http://host:port) after `delay_s` seconds, one thread per request."""

    def __init__(self, upstream: str, delay_s: float = 0.1) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.delay_s = delay_s
        self.requests = 0
        self.max_in_flight = 0
        self._in_flight = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
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

    def _enter(self) -> None:
        with self._lock:
            self.requests += 1
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _forward(self, method: str) -> None:
                proxy._enter()
                try:
                    time.sleep(proxy.delay_s)  # the round trip to a far-away store
                    conn = http.client.HTTPConnection(*proxy.upstream, timeout=30)
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_HEADERS | {"host"}}
                    conn.request(method, self.path, headers=headers)
                    reply = conn.getresponse()
                    body = reply.read()
                    conn.close()
                    self.send_response(reply.status)
                    for key, value in reply.getheaders():
                        if key.lower() not in HOP_HEADERS | {"content-length"}:
                            self.send_header(key, value)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    if method != "HEAD":
                        self.wfile.write(body)
                finally:
                    proxy._leave()

            def do_GET(self) -> None:  # noqa: N802 - the http.server spelling
                self._forward("GET")

            def do_HEAD(self) -> None:  # noqa: N802
                self._forward("HEAD")

        return Handler


if __name__ == "__main__":  # python tests/latency_proxy.py UPSTREAM [DELAY_S]: prints its URL, serves until killed
    import sys

    with LatencyProxy(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 0.1) as running:
        print(running.url, flush=True)
        threading.Event().wait()
