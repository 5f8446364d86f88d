"""An httpx transport that records every HTTP exchange and serves it back on replay.

Any SDK built on httpx (OpenAI, Anthropic, most others) is recorded by handing it a client:

>>> import agentlog as al
>>> def program(rec):                                       # doctest: +SKIP
...     client = al.transport.client(rec)
...     return client.get("https://example.com/status").json()

Each exchange becomes ``http.request`` / ``http.response`` inside a span of kind ``http``, with
both bodies stored as blobs (a page fetched twenty times is stored once). The cache key is
``METHOD | normalised URL | body``. Secrets never reach the disk or the key: the
``Authorization``, ``Proxy-Authorization``, ``api-key``, ``x-api-key``, ``Cookie`` and
``Set-Cookie`` headers and secret-looking query parameters are redacted first, plus any names
you add. When the recorder replays, the recorded response is served and the network is never
touched.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx

from ..events import ERROR, HTTP_REQUEST, HTTP_RESPONSE, BlobRef, Event
from ..keys import http_key
from .recorder import Recorder, active_recorder

__all__ = ["REDACTED", "SECRET_HEADERS", "SECRET_PARAMS", "RecordingTransport", "async_client", "client"]

REDACTED = "[REDACTED]"
#: Headers whose values never reach the log (compared case-insensitively).
SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "api-key", "x-api-key",
                            "cookie", "set-cookie", "x-goog-api-key"})
#: Query parameters redacted from recorded URLs and from cache keys.
SECRET_PARAMS = frozenset({"api_key", "api-key", "apikey", "key", "access_token", "token",
                           "client_secret", "password", "sig", "signature"})
#: Response headers kept in the log: enough to rebuild the response, nothing that varies per
#: request (dates, request ids) or that no longer applies (content-encoding: the body is stored
#: decoded).
KEPT_RESPONSE_HEADERS = frozenset({"content-type", "location", "retry-after", "link", "etag",
                                   "last-modified", "cache-control"})


def _redact_url(url: str, secret: frozenset[str]) -> str:
    parts = urlsplit(url)
    if not parts.query:
        return url
    query = [(k, REDACTED if k.lower() in secret else v) for k, v in parse_qsl(parts.query, keep_blank_values=True)]
    return urlunsplit(parts._replace(query=urlencode(query)))


class RecordingTransport(httpx.BaseTransport, httpx.AsyncBaseTransport):
    """Record each exchange through a recorder (the active one if none is given).

    Args:
        rec: the recorder; ``None`` uses the recorder active in the calling context.
        transport: the transport that really sends requests (default ``httpx.HTTPTransport()``).
        async_transport: the same for async clients (default ``httpx.AsyncHTTPTransport()``).
        redact: more header or query-parameter names to redact.
        keep_headers: more response headers to keep.
    """

    def __init__(self, rec: Recorder | None = None, *, transport: httpx.BaseTransport | None = None,
                 async_transport: httpx.AsyncBaseTransport | None = None, redact: Iterable[str] = (),
                 keep_headers: Iterable[str] = ()) -> None:
        self._rec = rec
        self._transport = transport
        self._async_transport = async_transport
        extra = frozenset(n.lower() for n in redact)
        self._secret_headers = SECRET_HEADERS | extra
        self._secret_params = SECRET_PARAMS | extra
        self._keep = KEPT_RESPONSE_HEADERS | frozenset(n.lower() for n in keep_headers)

    def _recorder(self) -> Recorder:
        rec = self._rec or active_recorder()
        if rec is None:
            raise RuntimeError("RecordingTransport needs a recorder: pass one, or send requests "
                               "inside a recorded program")
        return rec

    def _begin(self, rec: Recorder, request: httpx.Request, body: bytes) -> tuple[str, Event]:
        url = _redact_url(str(request.url), self._secret_params)
        key = http_key(request.method, url, body)
        headers = {k.lower(): (REDACTED if k.lower() in self._secret_headers else v)
                   for k, v in request.headers.items()}
        media = request.headers.get("content-type", "application/octet-stream")
        payload = {"key": key, "method": request.method, "url": url, "headers": headers,
                   "body": rec.blob(body, media) if body else None}
        return key, rec.emit(HTTP_REQUEST, payload)

    def _served(self, rec: Recorder, key: str, request_event: Event) -> httpx.Response | None:
        served = rec._sink.lookup(HTTP_RESPONSE, key)
        if served is None:
            return None
        event = rec._served(served, request_event.seq, None)
        if event.type == ERROR:
            raise httpx.TransportError(f"recorded failure (seq {event.seq}): {event.payload.get('error')}")
        return self._response(event.payload)

    @staticmethod
    def _response(payload: Mapping[str, Any]) -> httpx.Response:
        body = payload.get("body")
        content = body.read_bytes() if isinstance(body, BlobRef) else b""
        return httpx.Response(int(payload["status"]), headers=dict(payload.get("headers") or {}),
                              content=content)

    def _record(self, rec: Recorder, key: str, request_event: Event, response: httpx.Response,
                started: float) -> httpx.Response:
        rec.live_calls += 1
        content = response.content
        headers = {k.lower(): v for k, v in response.headers.items() if k.lower() in self._keep}
        media = response.headers.get("content-type", "application/octet-stream")
        payload = {"key": key, "status": response.status_code, "headers": headers,
                   "body": rec.blob(content, media) if content else None}
        rec.emit(HTTP_RESPONSE, payload, caused_by=request_event.seq,
                 duration_ms=(rec.timer() - started) * 1000)
        return httpx.Response(response.status_code, headers=headers, content=content)

    def _failed(self, rec: Recorder, key: str, request_event: Event, exc: BaseException) -> None:
        rec.emit(ERROR, {"kind": HTTP_RESPONSE, "key": key, "error": f"{type(exc).__name__}: {exc}",
                         "type": type(exc).__name__}, caused_by=request_event.seq)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Serve the recorded response, or send the request and record the exchange."""
        rec = self._recorder()
        body = request.read()
        with rec.span(f"{request.method} {request.url.host}", kind="http"):
            key, request_event = self._begin(rec, request, body)
            served = self._served(rec, key, request_event)
            if served is not None:
                return served
            inner = self._transport or httpx.HTTPTransport()
            started = rec.timer()  # the recorder's timer: a fixed clock makes runs reproducible
            try:
                response = inner.handle_request(request)
                response.read()
            except Exception as exc:
                self._failed(rec, key, request_event, exc)
                raise
            return self._record(rec, key, request_event, response, started)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """The async twin of :meth:`handle_request`."""
        rec = self._recorder()
        body = await request.aread()
        with rec.span(f"{request.method} {request.url.host}", kind="http"):
            key, request_event = self._begin(rec, request, body)
            served = self._served(rec, key, request_event)
            if served is not None:
                return served
            inner = self._async_transport or httpx.AsyncHTTPTransport()
            started = rec.timer()
            try:
                response = await inner.handle_async_request(request)
                await response.aread()
            except Exception as exc:
                self._failed(rec, key, request_event, exc)
                raise
            return self._record(rec, key, request_event, response, started)


def client(rec: Recorder | None = None, *, transport: httpx.BaseTransport | None = None,
           redact: Iterable[str] = (), **kwargs: Any) -> httpx.Client:
    """An ``httpx.Client`` whose exchanges are recorded through ``rec``."""
    return httpx.Client(transport=RecordingTransport(rec, transport=transport, redact=redact), **kwargs)


def async_client(rec: Recorder | None = None, *, transport: httpx.AsyncBaseTransport | None = None,
                 redact: Iterable[str] = (), **kwargs: Any) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` whose exchanges are recorded through ``rec``."""
    return httpx.AsyncClient(transport=RecordingTransport(rec, async_transport=transport, redact=redact),
                             **kwargs)
