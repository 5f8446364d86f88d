"""An OTLP/HTTP endpoint: ``agentlog serve --otlp PORT`` and :func:`serve`.

Any program that exports OpenTelemetry traces over OTLP/HTTP (Python, TypeScript, Go, Java,
the collector's ``otlphttp`` exporter) can point at it: ``POST /v1/traces`` with an
``ExportTraceServiceRequest`` as protobuf (``application/x-protobuf``) or JSON
(``application/json``), gzip-compressed or not. Each trace is written into the store as a run
(``otlp-<trace id>``) as its spans arrive, so the run grows while the agent runs; spans that
arrive later extend it, and spans sent twice are written once
(:class:`~agentlog.interop.otlp_import.TraceRuns`). A run no span reached for ``idle``
seconds is closed (its ``run.json`` gets its head and count); the next span reopens it.

The server is the standard library's ``ThreadingHTTPServer`` in a thread: OTLP/HTTP is one
POST route, exporters send batches (512 spans every 5 s by default), and the writes are
serialised per store anyway, so an async framework would add a dependency and nothing a
user would notice. It listens on ``127.0.0.1`` unless told otherwise: it has no
authentication.
"""

from __future__ import annotations

import gzip
import json
import logging
import threading
import zlib
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final, Self

from ..errors import AgentlogError
from ..interop.errors import InteropFormatError
from ..interop.otlp_import import TraceRuns
from ..interop.otlp_read import read_spans, spans_of_protobuf

__all__ = ["OTLPServer", "serve"]

log = logging.getLogger("agentlog.otel")

#: The OTLP/HTTP traces path.
TRACES_PATH: Final = "/v1/traces"
_PROTOBUF: Final = "application/x-protobuf"
_JSON: Final = "application/json"
_MAX_BODY: Final = 64 * 1024 * 1024


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    def do_POST(self) -> None:
        kind = (self.headers.get("Content-Type") or _PROTOBUF).split(";")[0].strip().lower()
        if self.path.split("?")[0] != TRACES_PATH:
            self._reply(HTTPStatus.NOT_FOUND, kind, f"no route {self.path}; traces go to {TRACES_PATH}")
            return
        try:
            body = self._body()
            spans = _json_spans(body) if kind == _JSON else spans_of_protobuf(body, "request")
            self.server.runs.add(spans)
        except (InteropFormatError, ValueError) as exc:
            self._reply(HTTPStatus.BAD_REQUEST, kind, str(exc))
            return
        except AgentlogError as exc:  # the store refused: the exporter may retry later
            log.exception("agentlog: could not write spans")
            self._reply(HTTPStatus.SERVICE_UNAVAILABLE, kind, str(exc))
            return
        self.server.received += len(spans)
        self._reply(HTTPStatus.OK, kind, None)

    def do_GET(self) -> None:
        self._reply(HTTPStatus.METHOD_NOT_ALLOWED, _JSON, f"POST traces to {TRACES_PATH}")

    def _body(self) -> bytes:
        size = int(self.headers.get("Content-Length") or 0)
        if size > _MAX_BODY:
            raise ValueError(f"a request of {size:,} bytes; the limit is {_MAX_BODY:,}")
        data = self.rfile.read(size)
        encoding = (self.headers.get("Content-Encoding") or "").lower()
        try:
            if encoding == "gzip":
                return gzip.decompress(data)
            if encoding == "deflate":
                return zlib.decompress(data)
        except (OSError, zlib.error) as exc:
            raise ValueError(f"the body is not {encoding} ({exc})") from None
        return data

    def _reply(self, status: HTTPStatus, kind: str, error: str | None) -> None:
        """An ``ExportTraceServiceResponse`` (success), or a ``google.rpc.Status`` (failure),
        in the request's encoding."""
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

        if kind == _JSON:
            data = json.dumps({} if error is None else {"code": 3, "message": error}).encode()
        elif error is None:
            data = ExportTraceServiceResponse().SerializeToString()
        else:
            data = _status(error)
        self.send_response(status)
        self.send_header("Content-Type", _JSON if kind == _JSON else _PROTOBUF)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _json_spans(body: bytes) -> list[Any]:
    request = json.loads(body)
    if not isinstance(request, dict):
        raise InteropFormatError("request", None, "JSON but not an ExportTraceServiceRequest object "
                                                  f"({type(request).__name__})")
    return read_spans(request)


def _status(message: str) -> bytes:
    """A ``google.rpc.Status`` (code 3, invalid argument) as protobuf bytes: field 1 = code,
    field 2 = message. Written by hand because opentelemetry-proto does not ship the rpc
    messages (googleapis-common-protos does, but nothing else here needs it)."""
    text = message.encode()[:65536]
    return bytes([0x08, 3, 0x12]) + _varint(len(text)) + text


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], runs: TraceRuns) -> None:
        super().__init__(address, _Handler)
        self.runs = runs
        self.received = 0


class OTLPServer:
    """A running OTLP/HTTP endpoint (see :func:`serve`). Stop it with :meth:`stop`, or use it
    as a context manager."""

    def __init__(self, server: _Server, idle: float) -> None:
        self._server = server
        self._idle = idle
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1},
                                        name="agentlog-otlp", daemon=True)
        self._closer = threading.Thread(target=self._close_idle, name="agentlog-otlp-idle", daemon=True)
        self._thread.start()
        self._closer.start()

    @property
    def url(self) -> str:
        """The base URL, e.g. ``http://127.0.0.1:4318`` (exporters add ``/v1/traces``)."""
        host, port = self._server.server_address[:2]
        name = host.decode() if isinstance(host, bytes) else str(host)
        return f"http://{name}:{port}"

    @property
    def traces_url(self) -> str:
        """The URL spans are posted to."""
        return self.url + TRACES_PATH

    @property
    def spans_received(self) -> int:
        """How many spans were received so far (duplicates included)."""
        return self._server.received

    def _close_idle(self) -> None:
        while not self._stopped.wait(min(1.0, self._idle)):
            self._server.runs.close_idle(self._idle)

    def stop(self) -> None:
        """Stop listening and close every run still open. Idempotent."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
        self._closer.join()
        self._server.runs.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "stopped" if self._stopped.is_set() else "running"
        return f"<OTLPServer {self.traces_url} {state}, {self.spans_received:,} spans>"


def serve(store: Any = None, *, port: int = 4318, host: str = "127.0.0.1", idle: float = 30.0) -> OTLPServer:
    """Accept OTLP/HTTP traces and write each trace into ``store`` as a run, live.

    Args:
        store: a :class:`~agentlog.Store`, a path, or ``None`` for the default store.
        port: the port (4318 is OTLP/HTTP's; 0 picks a free one, see ``.url``).
        host: the address to listen on (default: this machine only).
        idle: close a run no span reached for this many seconds (a later span reopens it).

    Returns:
        The running :class:`OTLPServer` (``.url``, ``.stop()``).

    Example::

        server = al.otel.serve("runs", port=4318)
        # elsewhere: OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 python agent.py
        server.stop()
    """
    from ..capture.session import resolve_store

    if idle <= 0:
        raise ValueError(f"idle must be a positive number of seconds, got {idle!r}")
    runs = TraceRuns(resolve_store(store), keep_open=True)
    return OTLPServer(_Server((host, port), runs), idle)
