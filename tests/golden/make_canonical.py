"""Regenerate tests/golden/canonical.json: input value -> canonical JSON -> SHA-256.

Run ``python tests/golden/make_canonical.py`` only when the canonical form is meant to change
(it never should: every stored hash depends on it).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from agentlog.canonical import canonical_json
from agentlog.chain import GENESIS, chain_hash, event_body

CASES: list[tuple[str, object]] = [
    ("empty object", {}),
    ("sorted keys", {"b": 1, "a": 2, "c": {"z": 0, "y": [3, 2, 1]}}),
    ("scalars", {"t": True, "f": False, "n": None, "i": -7, "big": 2**63 - 1}),
    ("floats", {"x": 0.1, "y": 1.0, "z": -0.0, "e": 1e-7, "g": 1e21, "h": 123456789.125}),
    ("unicode kept as UTF-8", {"é": "naïve — ✓", "emoji": "🙂", "cjk": "日本語"}),
    ("escapes", {"s": "quote\" backslash\\ newline\n tab\t nul\u0000 del\u007f"}),
    ("keys sort by code point", {"B": 1, "a": 2, "_": 3, "ä": 4, "10": 5, "9": 6}),
    ("nested arrays", [[], [[]], [1, [2, [3]]]]),
    ("blob ref", {"page": {"$blob": "sha256:" + "ab" * 32, "size": 10, "media_type": "text/html"}}),
    ("string that looks like a number", {"v": "1e3"}),
]


def main() -> None:
    vectors = []
    for name, value in CASES:
        text = canonical_json(value)
        vectors.append({"name": name, "input": value, "canonical": text,
                        "sha256": hashlib.sha256(text.encode()).hexdigest()})
    body = event_body(seq=0, type="note", payload_json=canonical_json({"text": "hi"}), ts=1_700_000_000_000_000,
                      actor="agent", model="m", input_tokens=3, cost_usd=0.25)
    chain = {"body": body, "prev": GENESIS, "hash": chain_hash(GENESIS, body)}
    out = Path(__file__).with_name("canonical.json")
    out.write_text(json.dumps({"vectors": vectors, "chain": chain}, ensure_ascii=False, indent=1) + "\n",
                   encoding="utf-8")
    print(f"wrote {out} ({len(vectors)} vectors)")


if __name__ == "__main__":
    main()
