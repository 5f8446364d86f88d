"""JSON Pointer (RFC 6901): the paths of JSON Patch operations.

A pointer is ``""`` (the whole document) or ``/``-separated reference tokens, in which ``~1``
stands for ``/`` and ``~0`` for ``~``. Whether a token is an object key or an array index
depends on the container it meets, so tokens stay strings here; :func:`array_index` reads one
as an index the way RFC 6901 spells them (decimal digits, no leading zeros) or ``-`` (the
position after the last element).

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

__all__ = ["END", "array_index", "escape_token", "format_pointer", "parse_pointer"]

END: Final = "-"
"""The token naming the position after the last element of an array."""

def parse_pointer(pointer: str) -> tuple[str, ...]:
    """Split a JSON Pointer into its unescaped reference tokens.

    Args:
        pointer: ``""`` or a string starting with ``/``.

    Returns:
        The tokens, ``()`` for the whole document.

    Raises:
        ValueError: the pointer does not start with ``/``, or has a ``~`` that is not
            ``~0`` or ``~1``; the message says which.

    >>> parse_pointer("/a~1b/~01/0/-")
    ('a/b', '~1', '0', '-')
    >>> parse_pointer("")
    ()
    >>> parse_pointer("a")
    Traceback (most recent call last):
    ...
    ValueError: a JSON Pointer must be empty or start with '/'
    """
    if type(pointer) is not str:
        raise TypeError(f"a JSON Pointer is a string, got {_json_type(pointer)}")
    if pointer == "":
        return ()
    if pointer[0] != "/":
        raise ValueError("a JSON Pointer must be empty or start with '/'")
    parts = pointer[1:].split("/")
    if "~" not in pointer:
        return tuple(parts)
    tokens = []
    for part in parts:
        if "~" in part:
            rest = part.replace("~0", "").replace("~1", "")
            if "~" in rest:
                raise ValueError("'~' must be followed by '0' or '1' "
                                 "(write '~0' for '~' and '~1' for '/')")
            # ~1 first: "~01" is the token "~1", not "/"
            part = part.replace("~1", "/").replace("~0", "~")
        tokens.append(part)
    return tuple(tokens)


def escape_token(token: str | int) -> str:
    """Escape one reference token (``~`` → ``~0``, ``/`` → ``~1``).

    >>> escape_token("a/b~c")
    'a~1b~0c'
    """
    text = str(token)
    if "~" in text or "/" in text:
        return text.replace("~", "~0").replace("/", "~1")
    return text


def format_pointer(tokens: Iterable[str | int]) -> str:
    """Join reference tokens into a JSON Pointer, escaping each.

    >>> format_pointer(["vars", "a/b", 0])
    '/vars/a~1b/0'
    >>> format_pointer([])
    ''
    """
    return "".join("/" + escape_token(t) for t in tokens)


def array_index(token: str, size: int, *, end_ok: bool = False) -> int:
    """Read a reference token as an index into an array of ``size`` elements.

    Args:
        token: decimal digits without leading zeros, or ``-``.
        size: the array's length.
        end_ok: whether the position after the last element is allowed (``add``): then
            ``-`` and ``size`` are accepted.

    Returns:
        The index.

    Raises:
        IndexError: the index is out of range, or ``-`` where no element is there.
        ValueError: the token is not an array index.

    >>> array_index("2", 3), array_index("-", 3, end_ok=True)
    (2, 3)
    >>> array_index("01", 3)
    Traceback (most recent call last):
    ...
    ValueError: '01' is not an array index
    """
    if token == END:
        if end_ok:
            return size
        raise IndexError("'-' names the position after the last element")
    if not token.isdigit() or not token.isascii() or (token[0] == "0" and len(token) > 1):
        raise ValueError(f"{token!r} is not an array index")
    index = int(token)
    if index > size or (index == size and not end_ok):
        raise IndexError(f"index {index} is out of range")
    return index


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return type(value).__name__
