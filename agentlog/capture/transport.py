"""An httpx transport that records every HTTP exchange and serves it back on replay.

Any SDK built on httpx (OpenAI, Anthropic, most others) is recorded by handing it a client:

>>> import agentlog as al, httpx, tempfile
>>> server = httpx.MockTransport(lambda request: httpx.Response(200, json={"up": True}))
>>> def program(rec):
...     client = al.transport.client(rec, transport=server)
...     return client.get("https://example.com/status?api_key=sk-123",
...                       headers={"Authorization": "Bearer sk-123"}).json()
>>> run = al.record(program, store=tempfile.mkdtemp(), name="status")
>>> asked = run.event(2)
>>> asked.payload["url"], asked.payload["headers"]["authorization"]
('https://example.com/status?api_key=%5BREDACTED%5D', '[REDACTED]')
>>> al.replay(program, run).ok   # served from the log: the server is not asked
True

Each exchange becomes ``http.request`` / ``http.response`` inside a span of kind ``http``, with
both bodies stored as blobs (a page fetched twenty times is stored once). The cache key is
``METHOD | normalised URL | body``. Secrets never reach the disk or the key
(:mod:`agentlog.redact`: ``Authorization``, ``Cookie``, API-key headers, secret query
parameters and URL passwords, fields of JSON and form request bodies named like secrets, plus
the run's names and any you add here; a body with a secret is stored re-encoded, with
``"[REDACTED]"``, and every other body byte for byte). When the recorder
replays, the recorded response is served and the network is never touched. An exchange is
one implementation (:mod:`agentlog.capture.effects`) for sync and async clients.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, Final
from urllib.parse import parse_qsl, urlencode

import httpx

from ..events import ERROR, HTTP_RESPONSE, CallFailed, HTTPRequest, HTTPResponse
from ..keys import http_key
from ..redact import MARKER, Redactor
from .effects import Live, Steps, arun, run
from .recorder import Recorder, active_recorder, call_failed

__all__ = ["KEPT_RESPONSE_HEADERS", "RecordingTransport", "async_client", "client"]

#: Response headers kept in the log: enough to rebuild the response, nothing that varies per
#: request (dates, request ids) or that no longer applies (content-encoding: the body is stored
#: decoded).
KEPT_RESPONSE_HEADERS: Final = frozenset({"content-type", "location", "retry-after", "link", "etag",
                                          "last-modified", "cache-control"})


def redact_body(redactor: Redactor, body: bytes, media_type: str) -> bytes:
    """A request body with its secrets redacted: a JSON body's fields and a form's fields by
    name (a body with nothing to redact, or of another type, comes back as it was).

    >>> from agentlog.redact import DEFAULT
    >>> redact_body(DEFAULT, b'{"model": "m", "api_key": "sk-1"}', "application/json")
    b'{"model": "m", "api_key": "[REDACTED]"}'
    >>> redact_body(DEFAULT, b"grant_type=x&client_secret=s3", "application/x-www-form-urlencoded")
    b'grant_type=x&client_secret=%5BREDACTED%5D'
    """
    media = media_type.split(";")[0].strip().lower()
    if media == "application/json" or media.endswith("+json"):
        try:
            value = json.loads(body)
        except ValueError:
            return body
        redacted = redactor.value(value)
        return body if redacted == value else json.dumps(redacted, ensure_ascii=False).encode()
    if media == "application/x-www-form-urlencoded":
        pairs = parse_qsl(body.decode("latin-1"), keep_blank_values=True)
        if not any(redactor.is_secret(k) for k, _ in pairs):
            return body
        return urlencode([(k, MARKER if redactor.is_secret(k) else v) for k, v in pairs]).encode()
    return body


def _send(inner: httpx.BaseTransport | None) -> Callable[[httpx.Request], httpx.Response]:
    def send(request: httpx.Request) -> httpx.Response:
        response = (inner or httpx.HTTPTransport()).handle_request(request)
        response.read()
        return response
    return send


def _asend(inner: httpx.AsyncBaseTransport | None) -> Callable[[httpx.Request], Any]:
    async def send(request: httpx.Request) -> httpx.Response:
        response = await (inner or httpx.AsyncHTTPTransport()).handle_async_request(request)
        await response.aread()
        return response
    return send


class RecordingTransport(httpx.BaseTransport, httpx.AsyncBaseTransport):
    """Record each exchange through a recorder (the active one if none is given).

    Args:
        rec: the recorder; ``None`` uses the recorder active in the calling context.
        transport: the transport that really sends requests (default ``httpx.HTTPTransport()``).
        async_transport: the same for async clients (default ``httpx.AsyncHTTPTransport()``).
        redact: more header or query-parameter names to redact (besides the run's).
        keep_headers: more response headers to keep.
    """

    def __init__(self, rec: Recorder | None = None, *, transport: httpx.BaseTransport | None = None,
                 async_transport: httpx.AsyncBaseTransport | None = None, redact: Iterable[str] = (),
                 keep_headers: Iterable[str] = ()) -> None:
        self._rec = rec
        self._transport = transport
        self._async_transport = async_transport
        self._redact = tuple(redact)
        self._keep = KEPT_RESPONSE_HEADERS | frozenset(n.lower() for n in keep_headers)

    def _recorder(self) -> Recorder:
        rec = self._rec or active_recorder()
        if rec is None:
            raise RuntimeError("RecordingTransport needs a recorder: pass one, or send requests "
                               "inside a recorded program")
        return rec

    def _exchange(self, rec: Recorder, request: httpx.Request, body: bytes,
                  send: Callable[[httpx.Request], Any]) -> Steps[httpx.Response]:
        """One exchange: the request, then the served or the live response."""
        redactor = rec.redactor.with_names(self._redact)
        with rec.span(f"{request.method} {request.url.host}", kind="http"):
            url = redactor.url(str(request.url))
            media = request.headers.get("content-type", "application/octet-stream")
            body = redact_body(redactor, body, media)
            key = http_key(request.method, url, body)
            asked = rec.emit(HTTPRequest(key=key, method=request.method, url=url,
                                         headers=redactor.headers(request.headers.items()),
                                         body=rec.blob(body, media) if body else None))
            served = rec.serve(HTTP_RESPONSE, key, asked)
            if served is not None:
                if served.type == ERROR:
                    raise httpx.TransportError(f"recorded failure (seq {served.seq}): "
                                               f"{CallFailed.of(served).error}")
                return self._response(HTTPResponse.of(served))
            started = rec.timer()  # the recorder's timer: a fixed clock makes runs reproducible
            try:
                response = yield Live(send, request)
            except Exception as exc:
                rec.emit(call_failed(HTTP_RESPONSE, key, exc), caused_by=asked.seq)
                raise
            rec.live_calls += 1
            content = response.content
            headers = {k.lower(): v for k, v in response.headers.items() if k.lower() in self._keep}
            media = response.headers.get("content-type", "application/octet-stream")
            rec.emit(HTTPResponse(key=key, status=response.status_code, headers=headers,
                                  body=rec.blob(content, media) if content else None,
                                  duration_ms=(rec.timer() - started) * 1000), caused_by=asked.seq)
            return httpx.Response(response.status_code, headers=headers, content=content)

    @staticmethod
    def _response(answer: HTTPResponse) -> httpx.Response:
        content = answer.body.read_bytes() if answer.body is not None else b""
        headers = {k: v if isinstance(v, str) else v.text() for k, v in answer.headers.items()}
        return httpx.Response(answer.status, headers=headers, content=content)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Serve the recorded response, or send the request and record the exchange."""
        return run(self._exchange(self._recorder(), request, request.read(), _send(self._transport)))

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """:meth:`handle_request` for async clients."""
        rec = self._recorder()
        return await arun(self._exchange(rec, request, await request.aread(), _asend(self._async_transport)))


def client(rec: Recorder | None = None, *, transport: httpx.BaseTransport | None = None,
           redact: Iterable[str] = (), **kwargs: Any) -> httpx.Client:
    """An ``httpx.Client`` whose exchanges are recorded through ``rec``."""
    return httpx.Client(transport=RecordingTransport(rec, transport=transport, redact=redact), **kwargs)


def async_client(rec: Recorder | None = None, *, transport: httpx.AsyncBaseTransport | None = None,
                 redact: Iterable[str] = (), **kwargs: Any) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` whose exchanges are recorded through ``rec``."""
    return httpx.AsyncClient(transport=RecordingTransport(rec, async_transport=transport, redact=redact),
                             **kwargs)
