"""One redaction policy: which values never reach the disk, and the one marker that replaces them.

A value is secret **by its name**: the name of the field, header or URL parameter that holds
it. Secrets are redacted before an event is hashed (redacting later would break the chain)
and before a cache key is computed from a request, so neither the log nor a key ever
depends on a credential: a rotated API key still replays.

===============================  ===========================================================
where                            what is redacted
===============================  ===========================================================
a mapping, at any depth          the whole value of a key named like a credential (see
(tool args, LLM request fields,  below), except in a JSON schema's ``properties``, where the
payloads, results)               name is a property's and its schema (a mapping) is kept
HTTP headers                     the same names: ``Authorization``, ``Cookie``,
                                 ``Set-Cookie``, ``X-Api-Key``, ``X-Goog-Api-Key``, ...
a URL (a string starting         its password (``https://user:pass@host``) and the values of
``http://`` or ``https://``)     secret query parameters: the names above plus
                                 :data:`URL_PARAMS` (``?key=``, ``?token=``, ``?sig=``)
===============================  ===========================================================

A name is a credential's when, lower-cased and with ``-`` read as ``_``, it is one of
:data:`SECRET_NAMES` or ends with one of :data:`SECRET_SUFFIXES`; a store, a run or a
recorder adds names of its own (``redact=["session_id"]``), which count everywhere. A name
such as ``key`` (every event's cache key) or ``max_tokens`` is data, not a secret; ``key``
and ``token`` are secrets only as URL parameters.

Text is not searched: a secret pasted into a prompt or a tool's free-text result is not
found. Name the field, or keep the secret out of the text.

Pure: no I/O.

>>> r = Redactor(["session_id"])
>>> r.value({"api_key": "sk-1", "q": "cats", "auth": {"Session-Id": 7, "user": "ann"}})
{'api_key': '[REDACTED]', 'q': 'cats', 'auth': {'Session-Id': '[REDACTED]', 'user': 'ann'}}
>>> r.value({"credentials": {"user": "ann", "pin": 1234}})
{'credentials': '[REDACTED]'}
>>> r.url("https://maps.example.com/v1?key=AIza123&q=tea")
'https://maps.example.com/v1?key=%5BREDACTED%5D&q=tea'
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = ["DEFAULT", "MARKER", "PROPERTIES", "SECRET_NAMES", "SECRET_SUFFIXES", "URL_PARAMS", "Redactor"]

#: What a redacted value becomes, everywhere.
MARKER: Final = "[REDACTED]"

#: Names of credentials (lower-case, ``_`` for ``-``): fields, headers and URL parameters.
SECRET_NAMES: Final = frozenset({
    "api_key", "apikey", "x_api_key", "authorization", "proxy_authorization", "cookie", "set_cookie",
    "access_token", "refresh_token", "id_token", "bearer_token", "auth_token", "client_secret",
    "secret", "password", "passwd", "private_key", "aws_access_key_id", "aws_secret_access_key",
    "aws_session_token", "azure_ad_token", "credentials",
})
#: Name endings that make a name a credential's (``openai_api_key``, ``x-goog-api-key``).
SECRET_SUFFIXES: Final = ("_api_key", "_secret", "_password", "_access_token", "_auth_token")
#: URL query parameters that carry credentials, besides :data:`SECRET_NAMES` (as field names
#: these are data: ``key`` is every event's cache key).
URL_PARAMS: Final = frozenset({"key", "token", "sig", "signature", "x_amz_signature",
                               "x_amz_security_token", "x_goog_signature"})

#: The key of a JSON schema under which property names (not secrets) are the keys.
PROPERTIES: Final = "properties"
_URL_SCHEMES: Final = ("http://", "https://")
_MEMO_LIMIT: Final = 4096


def _norm(name: str) -> str:
    return name.lower().replace("-", "_")


class Redactor:
    """The redaction policy, with the names a store, run or recorder adds.

    Args:
        names: more names whose values are secrets (case and ``-``/``_`` do not matter).

    A redactor is immutable; :meth:`with_names` returns a new one.
    """

    __slots__ = ("_extra", "_memo")

    def __init__(self, names: Iterable[str] = ()) -> None:
        self._extra = frozenset(_norm(str(n)) for n in names)
        self._memo: dict[str, bool] = {}

    @property
    def names(self) -> tuple[str, ...]:
        """The names added to the built-in ones, sorted."""
        return tuple(sorted(self._extra))

    def with_names(self, names: Iterable[str]) -> Redactor:
        """A redactor that also redacts ``names`` (this one when there are none to add)."""
        extra = frozenset(_norm(str(n)) for n in names) - self._extra
        return self if not extra else Redactor(self._extra | extra)

    def is_secret(self, name: str) -> bool:
        """True if a field or header of this name holds a credential.

        >>> DEFAULT.is_secret("X-Api-Key"), DEFAULT.is_secret("openai_api_key"), DEFAULT.is_secret("key")
        (True, True, False)
        """
        found = self._memo.get(name)
        if found is None:
            norm = _norm(name)
            found = norm in SECRET_NAMES or norm.endswith(SECRET_SUFFIXES) or norm in self._extra
            if len(self._memo) >= _MEMO_LIMIT:
                self._memo.clear()
            self._memo[name] = found
        return found

    def hides(self, name: Any, value: Any, *, schema: bool = False) -> bool:
        """True if the value under key ``name`` is replaced: the name is a credential's, and it
        is not a property's schema in a JSON schema's ``properties`` (``schema=True``)."""
        return (isinstance(name, str) and self.is_secret(name)
                and not (schema and isinstance(value, Mapping)))

    def is_secret_param(self, name: str) -> bool:
        """True if a URL query parameter of this name holds a credential.

        >>> DEFAULT.is_secret_param("key"), DEFAULT.is_secret_param("q")
        (True, False)
        """
        return _norm(name) in URL_PARAMS or self.is_secret(name)

    def url(self, url: str) -> str:
        """``url`` with its password and secret query values replaced by :data:`MARKER`.

        A URL with nothing to redact comes back as it was, byte for byte.

        >>> DEFAULT.url("https://bob:hunter2@example.com/x?a=1")
        'https://bob:%5BREDACTED%5D@example.com/x?a=1'
        """
        parts = urlsplit(url)
        netloc = parts.netloc
        if parts.password is not None:
            user, _, host = netloc.rpartition("@")
            netloc = f"{user.partition(':')[0]}:%5BREDACTED%5D@{host}"
        query = parts.query
        if query:
            pairs = parse_qsl(query, keep_blank_values=True)
            if any(self.is_secret_param(k) for k, _ in pairs):
                query = urlencode([(k, MARKER if self.is_secret_param(k) else v) for k, v in pairs])
        if netloc == parts.netloc and query == parts.query:
            return url
        return urlunsplit(parts._replace(netloc=netloc, query=query))

    def headers(self, headers: Iterable[tuple[str, str]] | Mapping[str, str]) -> dict[str, str]:
        """Headers with lower-cased names and secret values replaced by :data:`MARKER`.

        >>> DEFAULT.headers({"Authorization": "Bearer sk-1", "Accept": "json"})
        {'authorization': '[REDACTED]', 'accept': 'json'}
        """
        items = headers.items() if isinstance(headers, Mapping) else headers
        return {k.lower(): MARKER if self.is_secret(k) else v for k, v in items}

    def value(self, value: Any, *, schema: bool = False) -> Any:
        """A copy of a JSON-like value with every secret in it replaced by :data:`MARKER`:
        mapping values by their key's name, URLs by :meth:`url`. Tuples become lists.

        Args:
            schema: ``value`` is a JSON schema's ``properties`` (its keys name properties).
        """
        if isinstance(value, Mapping):
            return {k: MARKER if self.hides(k, v, schema=schema) else self.value(v, schema=k == PROPERTIES)
                    for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.value(v) for v in value]
        if isinstance(value, str) and looks_like_url(value):
            return self.url(value)
        return value

    def finds(self, value: Any, *, schema: bool = False) -> bool:
        """True if :meth:`value` would change anything in the JSON value ``value`` (a secret
        under its name, a URL's password or secret parameter), found without copying it: a
        request with nothing to redact is used as it is, not copied into an equal one.

        >>> DEFAULT.finds({"messages": [{"role": "user", "content": "hi"}], "api_key": "[REDACTED]"})
        False
        >>> DEFAULT.finds({"tools": [{"url": "https://x.example/?key=k1"}]})
        True
        """
        if isinstance(value, Mapping):
            for k, v in value.items():
                t = type(v)
                if t is str:
                    if (self.hides(k, v) and v != MARKER) or (looks_like_url(v) and self.url(v) != v):
                        return True
                elif self.hides(k, v, schema=schema):
                    return True  # a mapping, a list or a number: never the marker
                elif t is not int and t is not float and t is not bool and v is not None \
                        and self.finds(v, schema=k == PROPERTIES):
                    return True
            return False
        if isinstance(value, (list, tuple)):
            return any(self.finds(v) for v in value if type(v) is not int and type(v) is not float
                       and type(v) is not bool and v is not None)
        if isinstance(value, str) and looks_like_url(value):
            return self.url(value) != value
        return False

    def __repr__(self) -> str:
        return f"Redactor({list(self.names)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Redactor) and other._extra == self._extra

    def __hash__(self) -> int:
        return hash(self._extra)




def looks_like_url(text: str) -> bool:
    """True for an ``http(s)://`` URL that may carry a secret (a query or user info)."""
    return text.startswith(_URL_SCHEMES) and ("?" in text or "@" in text)


#: The built-in policy, with no names added.
DEFAULT: Final = Redactor()
