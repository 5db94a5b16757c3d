"""The pieces every local HTTP server of the examples and tests is made of.

A model server for a recording, a collector for spans, a host that misbehaves on purpose: each is
a ``ThreadingHTTPServer`` on 127.0.0.1 (the network guard lets loopback through, nothing leaves
the machine), served in a thread for the length of a ``with`` block, quiet, answering whole
bodies or server-sent events. ``LocalServer`` and ``QuietHandler`` hold that once, so a server
is only its routes: a subclass of ``QuietHandler`` with ``do_POST`` reaches its server's state
as ``self.owner``.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self

__all__ = ["LocalServer", "QuietHandler", "sse"]

#: The ``Date`` every answer carries: fixed, so recording twice writes the same bytes.
FIXED_DATE = "Mon, 30 Nov 2026 08:00:00 GMT"


def sse(data: Mapping[str, Any], event: str | None = None) -> str:
    """One server-sent event: ``event: NAME`` when given, then ``data:`` with ``data`` as compact
    JSON, then the blank line that ends it."""
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data, separators=(',', ':'))}\n\n"


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that logs nothing (a test's output stays its own), speaks HTTP/1.1 and
    dates its answers ``FIXED_DATE``."""

    server: _Http
    protocol_version = "HTTP/1.1"
    #: Headers every answer carries (a request id, as a provider's answers do).
    answer_headers: Mapping[str, str] = {}

    def date_time_string(self, timestamp: float | None = None) -> str:
        return FIXED_DATE

    def log_message(self, format: str, *args: Any) -> None:
        pass

    @property
    def owner(self) -> Any:
        """The ``LocalServer`` this request came to (its subclass: the routes' state)."""
        return self.server.owner

    def body(self) -> bytes:
        """The request's body, as long as its ``content-length`` says."""
        return self.rfile.read(int(self.headers.get("content-length") or 0))

    def header_map(self) -> dict[str, str]:
        """The request's headers, names in lower case."""
        return {k.lower(): v for k, v in self.headers.items()}

    def send(
        self,
        status: int,
        content_type: str,
        payload: bytes,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Answer with ``payload`` whole (its ``content-length`` given), ``answer_headers`` and
        ``headers`` besides."""
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(payload)))
        for name, value in {**self.answer_headers, **(headers or {})}.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)


class _Http(ThreadingHTTPServer):
    owner: LocalServer
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (a killed run) is not the server's failure: quiet then."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class LocalServer:
    """``handler``'s server on 127.0.0.1 (a free port unless given one): ``with`` serves it in a
    thread until the block ends (``start``/``close`` do the same by hand)."""

    def __init__(self, handler: type[QuietHandler], port: int = 0) -> None:
        self._server = _Http(("127.0.0.1", port), handler)
        self._server.owner = self
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def root(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Self:
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in this thread until interrupted (a command line's way)."""
        self._server.serve_forever()

    def close(self) -> None:
        """Stop serving (a request under way is not waited for) and free the port."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
