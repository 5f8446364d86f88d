"""Cache keys: the hash that finds a recorded answer for a model call, a tool call or an HTTP request.

A key is a public contract: replay and forks find recorded answers by it, so the recipes below
never change silently (``tests/golden/keys.json`` pins them). Each key is 64 lower-case hex
digits of SHA-256 over exactly these bytes:

- **LLM:** ``canonical_json(canonical_request(request))`` as UTF-8.
- **tool:** ``canonical_json({"name": name, "args": args})`` as UTF-8.
- **HTTP:** ``f"{METHOD}|{normalize_url(url)}|".encode()`` followed by the raw body bytes
  (a ``str`` body as UTF-8, ``None`` as no bytes).

A request is reduced to the fields that can change the answer: transport options, client
settings and secrets are dropped (:data:`IGNORED_FIELDS`, :func:`is_secret_field`), so keys do
not change when an API key rotates or a call is streamed. When a replay misses, the ``explain_*``
helpers show the exact text that was hashed, and :meth:`KeyParts.diff` names the parts in which
two requests differ.

Pure: no I/O.
"""

from __future__ import annotations

import codecs
import functools
import hashlib
import ipaddress
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal
from urllib.parse import parse_qsl, quote, urlsplit

from .canonical import canonical_json
from .errors import CanonicalJSONError
from .redact import DEFAULT, MARKER

__all__ = [
    "IGNORED_FIELDS",
    "REQUEST_SLOTS",
    "KeyParts",
    "canonical_llm_key",
    "canonical_request",
    "explain_http",
    "explain_llm",
    "explain_tool",
    "http_key",
    "is_secret_field",
    "llm_key",
    "normalize_url",
    "tool_key",
]

#: The top-level fields of a canonical request; every other field that counts goes in ``params``.
REQUEST_SLOTS: Final = ("model", "messages", "tools", "params", "response_format")

#: Request fields that cannot change the model's answer, so they are left out of the key.
#: Leaving out too much serves a wrong answer; leaving in too much only costs a cache miss,
#: so a field is here only when it certainly does not reach the model. Everything not listed
#: (``temperature``, ``top_p``, ``n``, ``seed``, ``stop``, ``max_tokens``, ``tool_choice``,
#: ``parallel_tool_calls``, ``logprobs``, ``reasoning_effort``, ``system``, ...) is kept.
IGNORED_FIELDS: Final = frozenset({
    # Delivery, not content: a streamed answer is the same tokens in chunks, and the recorder
    # stores the assembled response either way.
    "stream", "stream_options",
    # Who is asking, for the provider's abuse monitoring and dashboards; never shown to the model.
    "user", "safety_identifier", "metadata",
    # Whether the provider keeps a copy (OpenAI stored completions, distillation).
    "store",
    # Price and latency, not the model or its sampling: OpenAI and Anthropic serve the same model
    # on every tier. (``parallel_tool_calls`` is NOT here: false allows at most one tool call.)
    "service_tier",
    # A routing hint for the provider's prompt cache: changes cached_tokens, not the answer.
    "prompt_cache_key",
    # Client behaviour: how long to wait and how often to retry.
    "timeout", "request_timeout", "max_retries",
    # Where and how the request is sent. Headers carry credentials and tracing ids that change on
    # every call; the same model behind another endpoint (Azure, a proxy) gives the same answer,
    # so a run recorded against one replays against the other. Caveat: a beta header that changes
    # behaviour without touching the body (``anthropic-beta``) is not seen by the key.
    "extra_headers", "headers", "extra_query", "base_url", "api_base", "api_version",
    "organization", "project",
    # Credentials (also caught by ``is_secret_field``; listed so that the list reads whole).
    "api_key",
})

_DEFAULT_PORTS: Final = {"http": 80, "https": 443, "ws": 80, "wss": 443}
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
# RFC 3986 pchar minus '%' (escapes are handled apart): kept as they are in a path.
_PATH_SAFE = "/:@!$&'()*+,;=-._~"

KeyKind = Literal["llm", "tool", "http"]


def is_secret_field(name: str) -> bool:
    """True if a request field's name says it holds a credential (:mod:`agentlog.redact`'s policy).

    Case and ``-``/``_`` do not matter. ``max_tokens`` is not a secret: only whole names and the
    suffixes ``_api_key``, ``_secret``, ``_password``, ``_access_token``, ``_auth_token`` count.

    >>> is_secret_field("X-Api-Key"), is_secret_field("openai_api_key"), is_secret_field("max_tokens")
    (True, True, False)
    """
    return DEFAULT.is_secret(name)


def _plain(value: Any) -> Any:
    """A JSON-like copy in which SDK objects (pydantic ``model_dump``) became plain data.

    Programs often pass the SDK's own message objects back in ``messages``; dumping them with
    ``exclude_none`` spells them the way a hand-written dict would.
    """
    t = type(value)  # plain JSON first, without looking for model_dump on each value
    if t is str or t is int or t is float or t is bool or value is None:
        return value
    if t is dict:
        return {k: _plain(v) for k, v in value.items()}
    if t is list:
        return [_plain(v) for v in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        return _plain(dump(mode="json", exclude_none=True))
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes, bytearray)):
        return [_plain(v) for v in value]
    return value


def _message(msg: Any) -> Any:
    # ``content: None`` and a missing ``content`` mean the same to every chat API, and SDK dumps
    # write the one where hand-written dicts write the other. Only the message's own fields are
    # cleaned: deeper ``null``s (a JSON-schema ``default: null``) are data.
    if isinstance(msg, dict):
        return {k: v for k, v in msg.items() if v is not None}
    return msg


def _dropped(name: str, ignore: frozenset[str]) -> bool:
    return name in IGNORED_FIELDS or name in ignore or is_secret_field(name)


def _canonical(request: Mapping[str, Any], ignore: Iterable[str] = (),
               plain: bool = False) -> tuple[dict[str, Any], list[str]]:
    """The canonical request and the sorted names of the fields that were dropped (``plain``:
    see :func:`canonical_request`)."""
    if not isinstance(request, Mapping):
        raise TypeError(f"a request must be a mapping, got {type(request).__name__}")
    ignored = frozenset(ignore)
    dropped: set[str] = set()
    slots: dict[str, Any] = {"model": None, "messages": None, "tools": None, "response_format": None}
    params: dict[str, Any] = {}
    nested = request.get("params")
    if nested is not None and not isinstance(nested, Mapping):
        raise CanonicalJSONError("request.params", f"params must be a mapping, got {type(nested).__name__}")

    def put(name: str, value: Any, where: str) -> None:
        # ``None`` means "not given" in every SDK (OpenAI sends no field for it), so it is absent.
        if value is None:
            return
        if _dropped(name, ignored):
            dropped.add(f"{where}{name}")
            return
        target = slots if name in slots else params
        if not plain:
            value = _plain(value)
        if target.get(name) is not None and target[name] != value:
            raise CanonicalJSONError(f"request.{name}", f"given twice with different values "
                                     f"({target[name]!r} and {value!r}); keep one")
        target[name] = value

    for name, value in request.items():
        if type(name) is not str:
            raise CanonicalJSONError(f"request[{name!r}]", f"keys must be strings, got {type(name).__name__}")
        if name != "params":
            put(name, value, "")
    for name, value in (nested or {}).items():
        if type(name) is not str:
            raise CanonicalJSONError(f"request.params[{name!r}]",
                                     f"keys must be strings, got {type(name).__name__}")
        if name in ("model", "messages"):
            raise CanonicalJSONError(f"request.params.{name}", f"{name} belongs at the top level")
        put(name, value, "params.")

    messages = slots["messages"]
    canonical = {
        "model": slots["model"],
        # Missing and empty are the same request.
        "messages": [_message(m) for m in messages] if isinstance(messages, list) else (messages or []),
        "tools": slots["tools"] or [],
        "params": params,
        "response_format": slots["response_format"] or None,
    }
    return canonical, sorted(dropped)


def canonical_request(request: Mapping[str, Any], *, ignore: Iterable[str] = (),
                      plain: bool = False) -> dict[str, Any]:
    """The one shape of a chat-style model request that its cache key is computed from.

    The request may be nested (``{"model", "messages", "tools", "params": {...},
    "response_format"}``) or flat, OpenAI-style (``temperature``, ``max_tokens`` ... at the top
    level); both give ``{"model", "messages", "tools", "params", "response_format"}``. Fields in
    :data:`IGNORED_FIELDS`, fields named like credentials (:func:`is_secret_field`) and fields
    named in ``ignore`` are dropped, at the top level and in ``params``. ``None`` and empty
    values count as absent; ``tools`` and ``response_format`` given inside ``params`` move to the
    top level. Any other field (``system``, ``input``, ``extra_body``, ...) is kept in
    ``params``: an unknown field may change the answer.

    Args:
        request: the request mapping; SDK objects inside it (pydantic models) are dumped.
        ignore: more field names to leave out (say, a per-call ``trace_id``). Like the
            built-in lists, they match names at the top level and in ``params`` only; a field
            deeper down (inside ``extra_body``) must be removed by the caller.
        plain: the request holds JSON data only (it was parsed from JSON text): no SDK
            object to dump, so its values are used as they are, not copied (the result then
            shares them with ``request``).

    Returns:
        A new dict of plain JSON-like data with exactly the keys of :data:`REQUEST_SLOTS`.

    Raises:
        CanonicalJSONError: a field is given both flat and in ``params`` with different
            values, ``params`` is not a mapping, or a key is not a string.

    >>> flat = {"model": "m", "messages": [{"role": "user", "content": "hi"}],
    ...         "temperature": 0, "stream": True, "api_key": "sk-..."}
    >>> canonical_request(flat)
    {'model': 'm', 'messages': [{'role': 'user', 'content': 'hi'}], 'tools': [], 'params': {'temperature': 0}, 'response_format': None}
    >>> nested = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "params": {"temperature": 0}}
    >>> canonical_request(nested) == canonical_request(flat)
    True
    """
    return _canonical(request, ignore, plain)[0]


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def llm_key(request: Mapping[str, Any], *, ignore: Iterable[str] = ()) -> str:
    """The cache key of a model request: SHA-256 of ``canonical_json(canonical_request(request))``.

    >>> a = llm_key({"model": "m", "messages": [], "temperature": 0.2, "stream": True})
    >>> a == llm_key({"model": "m", "params": {"temperature": 0.2}, "tools": []})
    True
    >>> a == llm_key({"model": "m", "temperature": 0.3})
    False
    """
    return _sha256(canonical_json(canonical_request(request, ignore=ignore), path="request").encode())


def canonical_llm_key(canonical: Mapping[str, Any], *, walked: bool = False) -> str:
    """:func:`llm_key` of a request already in canonical form (what :func:`canonical_request`
    returned, maybe with its values redacted), without canonicalising it a second time:
    :func:`canonical_request` is idempotent, so the two keys are equal.

    ``walked``: as for :func:`~agentlog.canonical.canonical_json` (the request is known to hold
    only plain JSON values orjson writes canonically: see :func:`plain_numbers`).

    >>> once = canonical_request({"model": "m", "temperature": 0.2, "stream": True})
    >>> canonical_llm_key(once) == llm_key(once) == llm_key({"model": "m", "temperature": 0.2})
    True
    """
    return _sha256(canonical_json(canonical, path="request", walked=walked).encode())


def _tool_body(name: str, args: Mapping[str, Any] | None) -> dict[str, Any]:
    if type(name) is not str:
        raise TypeError(f"a tool name must be a str, got {type(name).__name__}")
    return {"name": name, "args": _plain(args) if args is not None else {}}


def tool_key(name: str, args: Mapping[str, Any] | None) -> str:
    """The cache key of a tool call: SHA-256 of ``canonical_json({"name": name, "args": args})``.

    Argument order does not matter; ``None`` args are the same as ``{}``.

    >>> tool_key("search", {"q": "x", "k": 3}) == tool_key("search", {"k": 3, "q": "x"})
    True
    """
    return _sha256(canonical_json(_tool_body(name, args), path="tool").encode())


def _normalize_escapes(text: str, safe: str) -> str:
    """Decode escapes of unreserved characters, upper-case the others, quote what must be quoted.

    RFC 3986 §6.2.2: ``%7E`` and ``~`` are the same character, ``%2f`` and ``%2F`` the same
    escape; ``%2F`` stays escaped, since decoding it would change the path's meaning.
    """
    out: list[str] = []
    pos = 0
    for m in _ESCAPE.finditer(text):
        out.append(quote(text[pos:m.start()], safe=safe))
        byte = int(m.group(1), 16)
        out.append(chr(byte) if byte in _UNRESERVED else f"%{byte:02X}")
        pos = m.end()
    out.append(quote(text[pos:], safe=safe))
    return "".join(out)


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 §5.2.4: ``/a/./b/../c`` is ``/a/c``."""
    if "." not in path:
        return path
    out: list[str] = []
    segments = path.split("/")
    for i, seg in enumerate(segments):
        last = i == len(segments) - 1
        if seg == ".":
            if last:
                out.append("")
        elif seg == "..":
            if len(out) > 1:
                out.pop()
            if last:
                out.append("")
        else:
            out.append(seg)
    result = "/".join(out)
    return result if result.startswith("/") or not path.startswith("/") else "/" + result


def _host(hostname: str) -> str:
    if ":" in hostname:  # IPv6: one spelling (compressed, lower-case), in brackets
        addr, _, zone = hostname.partition("%")
        try:
            addr = ipaddress.IPv6Address(addr).compressed
        except ValueError:
            addr = addr.lower()
        return f"[{addr}%{zone}]" if zone else f"[{addr}]"
    if not hostname.isascii():
        try:  # an internationalised name is sent as punycode, so it is keyed as punycode
            return hostname.encode("idna").decode("ascii").lower()
        except UnicodeError:
            return hostname.lower()
    return hostname.lower()


def _quote_q(text: str) -> str:
    return quote(text, safe="", errors="surrogateescape")


def normalize_url(url: str, *, redact: bool = True) -> str:
    """One spelling for URLs that reach the same resource (uses :mod:`urllib.parse`).

    - scheme and host lower-case; an IPv6 host compressed (``[2001:db8::1]``); a non-ASCII
      host as punycode; user info (``user:pass@``) dropped;
    - the default port dropped (80 for ``http``/``ws``, 443 for ``https``/``wss``);
    - the path kept case-sensitive, ``""`` read as ``/``, dot segments removed, escapes of
      unreserved characters decoded (``%7E`` → ``~``), other escapes upper-cased, characters
      that need it escaped as UTF-8;
    - query parameters decoded (``+`` is a space) and sorted by name, stable, so repeated names
      keep their order; blank values kept (``?flag`` becomes ``?flag=``); written back with
      ``%20`` for a space; an empty query dropped; with ``redact``, the values of secret
      parameters (:mod:`agentlog.redact`: ``key``, ``api_key``, ``token``, ...) become
      ``[REDACTED]``, so a URL and its redacted form have the same key;
    - the fragment dropped (it never reaches the server).

    Raises:
        ValueError: the URL has no scheme or host, or a port that is not a number.

    >>> normalize_url("HTTP://Example.COM:80/a/%7euser?b=2&a=1&a=0#frag")
    'http://example.com/a/~user?a=1&a=0&b=2'
    >>> normalize_url("https://[2001:DB8:0::1]:443?key=secret&q=a+b")
    'https://[2001:db8::1]/?key=%5BREDACTED%5D&q=a%20b'
    """
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if not scheme or not parts.netloc or parts.hostname is None:
        raise ValueError(f"{url!r} is not an absolute URL (scheme://host/...)")
    host = _host(parts.hostname)
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"{url!r}: the port is not a number between 0 and 65535") from None
    netloc = host if port is None or _DEFAULT_PORTS.get(scheme) == port else f"{host}:{port}"
    path = _remove_dot_segments(_normalize_escapes(parts.path, _PATH_SAFE)) or "/"
    # surrogateescape: an escape that is not UTF-8 comes back out as the same bytes.
    pairs = parse_qsl(parts.query, keep_blank_values=True, errors="surrogateescape")
    if redact:
        pairs = [(k, MARKER if DEFAULT.is_secret_param(k) else v) for k, v in pairs]
    pairs.sort(key=lambda kv: kv[0])  # stable: repeated names keep their order
    query = "&".join(f"{_quote_q(k)}={_quote_q(v)}" for k, v in pairs)
    return f"{scheme}://{netloc}{path}" + (f"?{query}" if query else "")


def _body_bytes(body: bytes | bytearray | memoryview | str | None) -> bytes:
    if body is None:
        return b""
    if isinstance(body, str):
        return body.encode("utf-8")
    if isinstance(body, (bytes, bytearray, memoryview)):
        return bytes(body)
    raise TypeError(f"an HTTP body must be bytes, str or None, got {type(body).__name__}")


@functools.lru_cache(maxsize=256)
def _http_prefix(method: str, url: str) -> str:
    # Memoised: a program sends to a few endpoints many times, and normalising a URL costs
    # more than hashing a small body. Pure (a URL's spelling depends on nothing else).
    return f"{method.strip().upper()}|{normalize_url(url)}|"


def http_key(method: str, url: str, body: bytes | str | None = None) -> str:
    """The cache key of an HTTP request: SHA-256 of ``f"{METHOD}|{normalize_url(url)}|"`` + body.

    The method is upper-cased; a ``str`` body is UTF-8; ``None`` and ``b""`` are the same.

    >>> http_key("get", "HTTPS://Example.com:443/x?b=1&a=2") == http_key("GET", "https://example.com/x?a=2&b=1", b"")
    True
    """
    h = hashlib.sha256(_http_prefix(method, url).encode())
    h.update(_body_bytes(body))  # not concatenated: a large body is not copied
    return h.hexdigest()


# --- explaining a key ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyParts:
    """What went into a cache key, for finding out why a replay missed.

    ``print(parts)`` shows the kind, the key, the dropped fields and the exact text that was
    hashed; :meth:`diff` lists the parts in which two requests differ.

    >>> a = explain_llm({"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0})
    >>> b = explain_llm({"model": "m", "messages": [{"role": "user", "content": "hi!"}], "temperature": 0})
    >>> a.diff(b)
    ['messages[0].content']
    """

    kind: KeyKind
    """``llm``, ``tool`` or ``http``."""
    key: str
    """The 64-hex key."""
    text: str
    """What was hashed, as text: the canonical JSON, or for HTTP ``METHOD|url|`` and a note of
    the body (its bytes are hashed as they are; see ``parts``)."""
    parts: Mapping[str, Any] = field(default_factory=dict)
    """The components: the canonical request, ``{"name", "args"}``, or for HTTP ``method``,
    ``url``, ``body_size``, ``body_sha256`` and ``body_preview`` (the first 200 characters, if
    the body is text)."""
    dropped: tuple[str, ...] = ()
    """Fields of the request that were left out of the key (``params.`` marks nested ones)."""

    def diff(self, other: KeyParts) -> list[str]:
        """The paths (``params.temperature``, ``messages[2].content``) where the parts differ."""
        out: list[str] = []
        _diff(self.parts, other.parts, "", out)
        return out

    def __str__(self) -> str:
        lines = [f"{self.kind} key {self.key}"]
        if self.dropped:
            lines.append("dropped: " + ", ".join(self.dropped))
        lines.append(f"hashed: {self.text}")
        return "\n".join(lines)


def _diff(a: Any, b: Any, path: str, out: list[str]) -> None:
    if a == b:
        return
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        for k in sorted(set(a) | set(b)):
            sub = f"{path}.{k}" if path else str(k)
            if k not in a or k not in b:
                out.append(sub)
            else:
                _diff(a[k], b[k], sub, out)
    elif isinstance(a, list) and isinstance(b, list):
        for i in range(max(len(a), len(b))):
            if i >= len(a) or i >= len(b):
                out.append(f"{path}[{i}]")
            else:
                _diff(a[i], b[i], f"{path}[{i}]", out)
    else:
        out.append(path or "$")


def explain_llm(request: Mapping[str, Any], *, ignore: Iterable[str] = ()) -> KeyParts:
    """The parts of :func:`llm_key` for ``request``.

    >>> print(explain_llm({"model": "m", "stream": True, "params": {"seed": 1}}))
    llm key 6a10bb0315a749868a48d4e6935df73500361f3f77767beaf3f03c55ff435f4d
    dropped: stream
    hashed: {"messages":[],"model":"m","params":{"seed":1},"response_format":null,"tools":[]}
    """
    canonical, dropped = _canonical(request, ignore)
    text = canonical_json(canonical, path="request")
    return KeyParts(kind="llm", key=_sha256(text.encode()), text=text, parts=canonical,
                    dropped=tuple(dropped))


def explain_tool(name: str, args: Mapping[str, Any] | None) -> KeyParts:
    """The parts of :func:`tool_key` for a call of ``name`` with ``args``.

    >>> explain_tool("add", {"b": 2, "a": 1}).text
    '{"args":{"a":1,"b":2},"name":"add"}'
    """
    body = _tool_body(name, args)
    text = canonical_json(body, path="tool")
    return KeyParts(kind="tool", key=_sha256(text.encode()), text=text, parts=body)


def explain_http(method: str, url: str, body: bytes | str | None = None) -> KeyParts:
    """The parts of :func:`http_key` for a request.

    >>> p = explain_http("post", "https://API.example.com/v1?b=1&a=2", '{"q": 1}')
    >>> p.text
    'POST|https://api.example.com/v1?a=2&b=1|<8 bytes>'
    >>> p.parts["body_preview"]
    '{"q": 1}'
    """
    prefix = _http_prefix(method, url)
    data = _body_bytes(body)
    try:  # incremental: a character cut at byte 800 is not an error
        preview: str | None = codecs.getincrementaldecoder("utf-8")().decode(data[:800])[:200]
    except UnicodeDecodeError:
        preview = None
    method_part, url_part, _ = prefix.split("|", 2)
    parts = {"method": method_part, "url": url_part, "body_size": len(data),
             "body_sha256": _sha256(data), "body_preview": preview}
    return KeyParts(kind="http", key=_sha256(prefix.encode() + data), text=f"{prefix}<{len(data)} bytes>",
                    parts=parts)
