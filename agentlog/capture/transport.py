"""Every HTTP exchange of a recorded program, recorded, and served back on replay.

Inside a recording (``al.record``, ``al.arecord``, ``al.recording``, ``al.run_agent``) and in
a replay or a fork, every request sent by any httpx client, sync or async, created before or
inside the block, goes through the recorder active in the calling context: httpx's transports
are patched once per process (:func:`~agentlog.capture.httpx_hook.install`, as the program
imports httpx; ``httpx2``, which the OpenAI, Anthropic and Agents SDKs import, too). Outside a
recording, in one made with ``capture_http=False``, and inside a call the recorder answers
itself (``rec.llm``, ``rec.tool``: on replay their answer is served and they are not called) a
request passes through untouched.

A request to a model endpoint (:mod:`agentlog.capture.endpoints`: OpenAI chat completions and
Responses, Anthropic messages, Gemini ``generateContent``, any OpenAI-compatible server) is a
model call: ``llm.request``, the exchange, and ``llm.response`` with usage and cost, in a span
of kind ``llm`` (:func:`model_calls` lists them, for the OpenTelemetry processor's join). A
streamed one reaches the program chunk by chunk; its answer is assembled when the stream ends
(:mod:`agentlog.capture.streams`).

A client can also be handed a recorder explicitly:

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

Each exchange becomes ``http.request`` / ``http.response`` inside a span of kind ``http`` (the
request's headers without the trace context a tracer added: :data:`TRACE_HEADERS`); a
body that is UTF-8 text under the run's blob threshold is kept in the event, any other as a
blob (a page fetched twenty times is stored once); a model call's bodies stay in the event up
to 1 MiB (they hold the whole conversation, unique to the call: a blob would save nothing and
cost two fsyncs). The cache key is
``METHOD | normalised URL | body``. Secrets never reach the disk or the key
(:mod:`agentlog.redact`: ``Authorization``, ``Cookie``, API-key headers, secret query
parameters and URL passwords, fields of JSON and form request bodies named like secrets, plus
the run's names and any you add here; a body with a secret is stored re-encoded, with
``"[REDACTED]"``, and every other body byte for byte). When the recorder
replays, the recorded response is served and the network is never touched. An exchange is
one implementation (:mod:`agentlog.capture.effects`) for sync and async clients.

Durability (the default, ``fsync``): a request's events are written to the WAL before the
request goes out, so a process that dies while it is in flight leaves them in the run. Those
of a request that may change something (any but a model call) are fsynced before it goes
out, so they survive a power loss too; a model call's are fsynced with its answer, one fsync
a call instead of two (a power loss while it is in flight can lose that it was asked, but no
answer the program saw).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import threading
import weakref
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import parse_qsl, urlencode

import httpx

log = logging.getLogger("agentlog.capture")

from ..errors import RunClosedError, UsageError
from ..events import (
    ERROR,
    HTTP_RESPONSE,
    LLM_RESPONSE,
    Body,
    CallFailed,
    Event,
    HTTPRequest,
    HTTPResponse,
    LLMResponse,
    Text,
)
from ..keys import http_key
from ..redact import MARKER, Redactor
from ..store.writer import Emit
from .effects import Opaque, Steps, arun, run
from .endpoints import ModelCall, model_call
from .headers import TRACE_HEADERS
from .httpx_hook import HTTPX_MODULES, install, installed, uninstall
from .providers import reports_usage
from .recorder import OpenSpan, Recorder, active_recorder, call_failed
from .streams import assemble, events_of

__all__ = ["HTTPX_MODULES", "KEPT_RESPONSE_HEADERS", "TRACE_HEADERS", "RecordingTransport", "TransportCall", "async_client", "client",
           "exchange", "flow", "install", "installed", "model_calls", "uninstall"]

#: Response headers kept in the log: enough to rebuild the response, nothing that varies per
#: request (dates, request ids) or that no longer applies (content-encoding: the body is stored
#: decoded).
KEPT_RESPONSE_HEADERS: Final = frozenset({"content-type", "location", "retry-after", "link", "etag",
                                          "last-modified", "cache-control"})


def redact_body(redactor: Redactor, body: bytes, media_type: str, parsed: Any = None) -> bytes:
    """A request body with its secrets redacted: a JSON body's fields and a form's fields by
    name (a body with nothing to redact, or of another type, comes back as it was).
    ``parsed``: the JSON body already parsed, when the caller has it.

    >>> from agentlog.redact import DEFAULT
    >>> redact_body(DEFAULT, b'{"model": "m", "api_key": "sk-1"}', "application/json")
    b'{"model": "m", "api_key": "[REDACTED]"}'
    >>> redact_body(DEFAULT, b"grant_type=x&client_secret=s3", "application/x-www-form-urlencoded")
    b'grant_type=x&client_secret=%5BREDACTED%5D'
    """
    if _is_json(media_type):
        try:
            value = json.loads(body) if parsed is None else parsed
        except ValueError:
            return body
        if not redactor.finds(value):
            return body
        return json.dumps(redactor.value(value), ensure_ascii=False).encode()
    if media_type.split(";")[0].strip().lower() == "application/x-www-form-urlencoded":
        pairs = parse_qsl(body.decode("latin-1"), keep_blank_values=True)
        if not any(redactor.is_secret(k) for k, _ in pairs):
            return body
        return urlencode([(k, MARKER if redactor.is_secret(k) else v) for k, v in pairs]).encode()
    return body


def _is_json(media_type: str) -> bool:
    media = media_type.split(";")[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def _send(transport: httpx.BaseTransport) -> Callable[[httpx.Request], httpx.Response]:
    def send(request: httpx.Request) -> httpx.Response:
        response = transport.handle_request(request)
        response.read()
        return response
    return send


def _asend(transport: httpx.AsyncBaseTransport) -> Callable[[httpx.Request], Any]:
    async def send(request: httpx.Request) -> httpx.Response:
        response = await transport.handle_async_request(request)
        await response.aread()
        return response
    return send


@dataclass(slots=True)
class TransportCall:
    """A model call the transport wrote, from when it was asked (its answer may come later: a
    tracer's span of the same call may end before the stream it started does)."""

    request_seq: int
    """The seq of its ``llm.request``."""
    answered: bool = False
    """True once it is over: its answer (or its failure) written, or served."""
    joined: bool = False
    """True once an OpenTelemetry span of the same call was joined to it."""
    thread: int = 0
    """The thread that asked it (:func:`flow`)."""
    task: int | None = None
    """The ``id`` of the asyncio task that asked it, if one did (:func:`flow`)."""
    shared: bool = False
    """True once a second span took it as its call by the flow it started in (see
    :mod:`agentlog.otel.processor`)."""


def flow() -> tuple[int, asyncio.Task[Any] | None]:
    """Where the calling code runs: its thread, and its asyncio task when a loop runs in that
    thread. Code of one flow runs one step after another, so a span opened in a flow is still
    open around any call the same flow makes before the span ends."""
    loop = asyncio._get_running_loop()  # None outside a loop, with no exception raised and caught
    return threading.get_ident(), asyncio.current_task(loop) if loop is not None else None


_calls: weakref.WeakKeyDictionary[Recorder, deque[TransportCall]] = weakref.WeakKeyDictionary()
_CALLS_KEPT: Final = 1000


def model_calls(rec: Recorder) -> deque[TransportCall]:
    """The model calls the transport wrote through ``rec`` (the last 1,000), oldest first, for
    the OpenTelemetry processor's join (which drops those it has joined from the front)."""
    found = _calls.get(rec)
    if found is None:
        found = _calls[rec] = deque(maxlen=_CALLS_KEPT)
    return found


def _answer(rec: Recorder, call: ModelCall, key: str, status: int, content: bytes,
            asked: Event, started: float) -> Body:
    """The ``llm.response`` (or the ``error``) of a model call answered with ``content`` (a
    streamed answer's raw events, assembled)."""
    if not 200 <= status < 300:
        return CallFailed(kind=LLM_RESPONSE, key=key, error=f"HTTP {status}: {content[:200].decode(errors='replace')}",
                          type="HTTPStatusError")
    try:
        raw = assemble(call.api, events_of(call.api, content)) if call.streamed else json.loads(content)
        answer = rec._llm_answer(raw, key, call.request, asked, started, call.provider)
    except (ValueError, TypeError, UsageError) as exc:
        return CallFailed(kind=LLM_RESPONSE, key=key, error=f"unreadable model answer: {exc}",
                          type=type(exc).__name__)
    if isinstance(answer, LLMResponse) and call.streamed:
        unknown = not reports_usage(raw)  # the stream reported none
        answer = dataclasses.replace(answer, streamed=True)
        if unknown:  # tokens and cost unknown, never 0
            answer = dataclasses.replace(answer, usage=None, cost_usd=None, cost_source="unknown")
    return answer


def _served_answer(rec: Recorder, call: ModelCall, key: str, answer: HTTPResponse,
                   asked: Event) -> Event:
    """Serve the recorded answer of a model call whose HTTP response was served: the log's own
    (a replay, a fork's cache or edit), or, when the log has none, the answer read from the
    served bytes as a served answer costs: nothing (a fork's edited HTTP response: its answer
    is edited too)."""
    served = rec.serve(LLM_RESPONSE, key, asked)
    if served is not None:
        return served
    body = _answer(rec, call, key, answer.status, answer.content, asked, rec.timer())
    if isinstance(body, LLMResponse):
        body = dataclasses.replace(body, cache_hit=True, cost_source="cache", duration_ms=None,
                                   served_from_seq=answer.served_from_seq, edited=answer.edited,
                                   cost_usd=0.0 if body.model is not None else None)
    return rec.emit(body, caused_by=asked.seq)


@dataclass(slots=True)
class _Asked:
    """What an exchange wrote before its answer came: its span, the requests and their keys."""

    rec: Recorder
    call: ModelCall | None
    span: OpenSpan
    key: str
    request: Event
    llm_key: str | None = None
    llm_request: Event | None = None
    entry: TransportCall | None = None
    """The model call in :func:`model_calls`, for a model call."""

    def done(self) -> None:
        """The call is over (answered, failed or served): no longer in flight."""
        if self.entry is not None:
            self.entry.answered = True

    def answered(self, status: int, headers: dict[str, Any], media: str, content: bytes,
                 started: float) -> None:
        """Write the live answer and end the span, in one batch: ``http.response``, for a model
        call ``llm.response``, and ``span.ended``."""
        rec, span = self.rec, self.span
        actor, span_id = rec.actor, span.span_id
        call = self.call
        # A stream's raw bytes are kept as any body is: in the event (a blob file of its own
        # would cost two more fsyncs a call), replayed chunk by chunk from there.
        items = [Emit(HTTPResponse(key=self.key, status=status, headers=headers,
                                   body=_kept_body(rec, content, media),
                                   duration_ms=(rec.timer() - started) * 1000), actor, self.request.seq, span_id,
                      inline=call is not None)]
        asked = self.llm_request
        if call is not None and asked is not None and self.llm_key is not None:
            try:
                answer = _answer(rec, call, self.llm_key, status, content, asked, started)
            except BaseException:
                rec.emit_many(items)  # as one event at a time: the response was written before
                raise
            items.append(Emit(answer, actor, asked.seq, span_id))
        items.append(span.ending())
        rec.emit_many(items)
        span.ended = True
        self.done()


def _ask(rec: Recorder, request: Any, body: bytes, call: ModelCall | None, redact: Iterable[str],
         name: str) -> _Asked:
    """Open the exchange's span and write its requests, in one batch, before the request is
    sent: ``span.started``, ``llm.request`` for a model call, then ``http.request``."""
    started = rec._span_started(name, "llm" if call else "http")
    actor = rec.actor
    items = [Emit(started, actor, span_item=0)]  # the span's id: its span.started's seq, taken as written
    taken: list[Event] = []
    batched = False
    try:
        llm_key, clean = None, False
        redactor = rec.redactor.with_names(redact)
        media = request.headers.get("content-type", "application/octet-stream")
        if call is not None:
            # One look for secrets in the parsed body serves both: with none (the usual case)
            # the canonical request needs no redacted copy (the run's names are a subset of
            # these) and the body is kept byte for byte.
            clean = not redactor.finds(call.body)
            llm_body = rec._llm_request(call.request, call.provider, redacted=clean, text=body)
            llm_key = llm_body.key
            items.append(Emit(llm_body, actor, span_item=0))
        if call is None or not clean or not _is_json(media):
            body = redact_body(redactor, body, media, None if call is None else call.body)
        url = redactor.url(str(request.url))
        key = http_key(request.method, url, body)
        items.append(Emit(HTTPRequest(key=key, method=request.method, url=url,
                                      headers=redactor.headers(_kept_headers(request.headers.items())),
                                      body=_kept_body(rec, body, media)),
                          actor, caused_by_item=None if call is None else 1, inline=call is not None,
                          span_item=0))
        batched = True
        rec.emit_many(items, taken=taken, sync=call is None)
    except BaseException as exc:
        try:
            if not batched:  # as one event at a time: what was written before this step failed
                rec.emit_many(items, taken=taken)
        finally:
            if taken:  # the span was opened: it ends with the error
                OpenSpan(rec, name, str(taken[0].span_id), taken[0].seq, None).close(exc)
        raise
    span = OpenSpan(rec, name, str(taken[0].span_id), taken[0].seq, None)
    entry = None
    if call is not None:  # a tracer's span of its flow can take it from now on, whenever its answer comes
        thread, task = flow()
        entry = TransportCall(taken[1].seq, thread=thread, task=None if task is None else id(task))
        model_calls(rec).append(entry)
    return _Asked(rec, call, span, key, taken[-1], llm_key, taken[1] if call is not None else None, entry)


def _kept_headers(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The request headers to record: all but the trace context a tracer added
    (:data:`~agentlog.capture.headers.TRACE_HEADERS`: new ids on every run)."""
    return [(name, value) for name, value in headers if name.lower() not in TRACE_HEADERS]


def _serve(asked: _Asked, http: Any) -> Any:
    """The recorded response to serve (and the model call's recorded answer), or ``None``."""
    rec, call = asked.rec, asked.call
    served = rec.serve(HTTP_RESPONSE, asked.key, asked.request)
    if served is None:
        return None
    asked.done()
    if served.type == ERROR:
        failed = CallFailed.of(served)
        if asked.llm_request is not None and asked.llm_key is not None \
                and rec.serve(LLM_RESPONSE, asked.llm_key, asked.llm_request) is None:
            rec.emit(dataclasses.replace(failed, kind=LLM_RESPONSE, key=asked.llm_key),
                     caused_by=asked.llm_request.seq)
        raise _recorded_failure(failed, http)
    answer = HTTPResponse.of(served)
    if call is not None and asked.llm_request is not None and asked.llm_key is not None:
        _served_answer(rec, call, asked.llm_key, answer, asked.llm_request)
    return _response(answer, http)


def _failed(asked: _Asked, exc: Exception) -> None:
    asked.done()
    asked.rec.emit(call_failed(HTTP_RESPONSE, asked.key, exc), caused_by=asked.request.seq)
    if asked.llm_request is not None and asked.llm_key is not None:
        asked.rec.emit(call_failed(LLM_RESPONSE, asked.llm_key, exc), caused_by=asked.llm_request.seq)


def _read(response: Any) -> Any:
    """The body of a response opened unread: bytes, or an awaitable of them (async)."""
    return response.aread() if hasattr(response.stream, "__aiter__") and not hasattr(
        response.stream, "__iter__") else response.read()


def exchange(rec: Recorder, request: Any, body: bytes, send: Callable[[Any], Any], *,
             redact: Iterable[str] = (), keep: frozenset[str] = KEPT_RESPONSE_HEADERS,
             http: Any = httpx, open_stream: Callable[[Any], Any] | None = None) -> Steps[Any]:
    """One exchange: the request, then the served or the live response.

    ``http`` is the module whose ``Response`` the client expects (``httpx`` or ``httpx2``).
    ``send`` returns the response read whole; ``open_stream``, when given, returns it unread,
    for a streamed model call: the client then reads each chunk as the server sends it, and
    the answer and the span's end are written when the stream ends (or is closed).

    A request to a model endpoint (:mod:`agentlog.capture.endpoints`) is written as a model
    call too: ``llm.request``, the exchange, then ``llm.response`` with usage and cost, in a
    span of kind ``llm``.
    """
    call = model_call(request.method, request.url.path, body)
    name = str(call.request.get("model") or "llm") if call else f"{request.method} {request.url.host}"
    streaming = call is not None and call.streamed and open_stream is not None
    asked = _ask(rec, request, body, call, redact, name)
    span = asked.span
    try:
        with span.entered():
            served = _serve(asked, http)
            if served is not None:
                span.close()
                return served
            started = rec.timer()  # the recorder's timer: a fixed clock makes runs reproducible
            try:
                response = yield Opaque(open_stream if streaming else send, request)  # type: ignore[arg-type]
            except Exception as exc:
                _failed(asked, exc)
                raise
            rec.live_calls += 1
            headers = {k.lower(): v for k, v in response.headers.items() if k.lower() in keep}
            media = response.headers.get("content-type", "application/octet-stream")
            if streaming and 200 <= response.status_code < 300:
                tee = _tee(http, response.stream, lambda content: _streamed(asked, headers, media, content,
                                                                             started))
                return http.Response(response.status_code, headers=headers, stream=tee)
            content = (yield Opaque(_read, response)) if streaming else response.content
            asked.answered(response.status_code, headers, media, content, started)
    except BaseException as exc:
        asked.done()
        if not span.ended:
            span.close(exc)
        raise
    return http.Response(response.status_code, headers=headers, content=content)


def _streamed(asked: _Asked, headers: dict[str, Any], media: str, content: bytes, started: float) -> None:
    """A stream ended (or was closed): write its answer, and end its span."""
    try:
        asked.answered(200, headers, media, content, started)
    except RunClosedError:  # the program kept the stream past its recording
        log.warning("agentlog: a stream ended after its recording %s closed; its answer is not "
                    "recorded", asked.rec.run_id)


class _TeeBase:
    """A response stream that hands each chunk on as it arrives and keeps a copy; at the end
    (or when closed) the whole body goes to ``done``, once."""

    def __init__(self, inner: Any, done: Callable[[bytes], None]) -> None:
        self._inner, self._done, self._parts, self._finished = inner, done, list[bytes](), False

    def _finish(self) -> None:
        if not self._finished:
            self._finished = True
            self._done(b"".join(self._parts))

    def __iter__(self) -> Iterator[bytes]:
        for part in self._inner:
            self._parts.append(part)
            yield part
        self._finish()

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            self._finish()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for part in self._inner:
            self._parts.append(part)
            yield part
        self._finish()

    async def aclose(self) -> None:
        try:
            await self._inner.aclose()
        finally:
            self._finish()


_tees: dict[tuple[str, bool], type] = {}


def _tee(http: Any, inner: Any, done: Callable[[bytes], None]) -> Any:
    """A :class:`_TeeBase` of ``http``'s sync or async byte stream, as ``inner`` is."""
    asynchronous = hasattr(inner, "__aiter__") and not hasattr(inner, "__iter__")
    cls = _tees.get((http.__name__, asynchronous))
    if cls is None:
        base = http.AsyncByteStream if asynchronous else http.SyncByteStream
        cls = _tees[(http.__name__, asynchronous)] = type("TeeStream", (_TeeBase, base), {})
    return cls(inner, done)


def _recorded_failure(failed: CallFailed, http: Any) -> Exception:
    """The exception a recorded failure raises again: the same httpx error with the same message
    (so the program, and the span it was in, end as they did), else a ``TransportError``."""
    cls = getattr(http, str(failed.type), None)
    text = str(failed.error)
    if isinstance(cls, type) and issubclass(cls, http.TransportError):
        prefix = f"{failed.type}: "
        return cls(text.removeprefix(prefix))  # type: ignore[no-any-return]
    return http.TransportError(f"recorded failure: {text}")  # type: ignore[no-any-return]


def _response(answer: HTTPResponse, http: Any) -> Any:
    headers = {k: v if isinstance(v, str) else v.text() for k, v in answer.headers.items()}
    return http.Response(answer.status, headers=headers, content=answer.content)


def _kept_body(rec: Recorder, content: bytes, media: str) -> Text | None:
    """A body as an HTTP event keeps it: its text when it is UTF-8, in the event itself (a
    model call's JSON needs no blob file of its own, which costs more than the rest of its
    recording; the store moves long text to a blob, a model call's only past
    :data:`~agentlog.store.writer.INLINE_MAX`: its events are ``Emit(..., inline=True)``,
    since its body, the whole conversation, is unique to the call), else a blob of its bytes."""
    if not content:
        return None
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError:
        return rec.blob(content, media)


class RecordingTransport(httpx.BaseTransport, httpx.AsyncBaseTransport):
    """Record each exchange through a recorder (the active one if none is given).

    A streamed model call reaches the client chunk by chunk, as the server sends it (as
    through the process-wide patch); its answer is written when the stream ends.

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
        self._own_sync = self._own_async = False

    def _recorder(self) -> Recorder:
        rec = self._rec or active_recorder()
        if rec is None:
            raise RuntimeError("RecordingTransport needs a recorder: pass one, or send requests "
                               "inside a recorded program")
        return rec

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Serve the recorded response, or send the request and record the exchange."""
        if self._transport is None:
            self._transport, self._own_sync = httpx.HTTPTransport(), True
        response: httpx.Response = run(exchange(self._recorder(), request, request.read(),
                                                _send(self._transport), redact=self._redact, keep=self._keep,
                                                open_stream=self._transport.handle_request))
        return response

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """:meth:`handle_request` for async clients."""
        rec = self._recorder()
        if self._async_transport is None:
            self._async_transport, self._own_async = httpx.AsyncHTTPTransport(), True
        response: httpx.Response = await arun(exchange(rec, request, await request.aread(),
                                                       _asend(self._async_transport), redact=self._redact,
                                                       keep=self._keep,
                                                       open_stream=self._async_transport.handle_async_request))
        return response

    def close(self) -> None:
        """Close the transport this one made for itself (the client closes it)."""
        if self._own_sync and self._transport is not None:
            self._transport.close()

    async def aclose(self) -> None:
        """Close the async transport this one made for itself."""
        if self._own_async and self._async_transport is not None:
            await self._async_transport.aclose()


def client(rec: Recorder | None = None, *, transport: httpx.BaseTransport | None = None,
           redact: Iterable[str] = (), **kwargs: Any) -> httpx.Client:
    """An ``httpx.Client`` whose exchanges are recorded through ``rec``."""
    return httpx.Client(transport=RecordingTransport(rec, transport=transport, redact=redact), **kwargs)


def async_client(rec: Recorder | None = None, *, transport: httpx.AsyncBaseTransport | None = None,
                 redact: Iterable[str] = (), **kwargs: Any) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` whose exchanges are recorded through ``rec``."""
    return httpx.AsyncClient(transport=RecordingTransport(rec, async_transport=transport, redact=redact),
                             **kwargs)


# --- the process-wide patch is agentlog.capture.httpx_hook (it imports httpx only when the
# program does); install, uninstall, installed and HTTPX_MODULES are re-exported here, where
# they were first.
