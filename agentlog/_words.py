"""Words in messages: the article a name takes when a message puts a value's type in a sentence
(``is an llm.response``, ``must be an int``, ``a tool.result body``)."""

from __future__ import annotations

from typing import Final

__all__ = ["with_article"]

#: Abbreviations read letter by letter whose first letter sounds like a vowel ("an el-el-em").
_SPELLED: Final = ("llm", "http", "html", "s3", "sdk", "sql", "xml", "mcp", "rfc", "rsa", "x25519", "x448")
#: Single letters whose name starts with a vowel sound ("an m", "an x").
_LETTERS: Final = frozenset("aefhilmnorsx")
#: Vowel-letter starts that sound like a consonant ("a union", "a user", "a utf-8", "a one").
_CONSONANT_SOUND: Final = ("uni", "usa", "use", "usu", "uu", "utf", "one", "eu")


def with_article(word: str) -> str:
    """``word`` after ``a`` or ``an``, by how it sounds (type and event names in messages).

    >>> [with_article(w) for w in ("int", "str", "object", "llm.response", "tool.result", "error")]
    ['an int', 'a str', 'an object', 'an llm.response', 'a tool.result', 'an error']
    >>> [with_article(w) for w in ("s3", "gs", "m", "v", "user", "approval.requested")]
    ['an s3', 'a gs', 'an m', 'a v', 'a user', 'an approval.requested']
    """
    low = word.lower()
    if len(low) == 1:
        vowel = low in _LETTERS
    elif low.startswith(_SPELLED):
        vowel = True
    else:
        vowel = low[:1] in ("a", "e", "i", "o", "u") and not low.startswith(_CONSONANT_SOUND)
    return f"{'an' if vowel else 'a'} {word}"
