"""``python -m agentlog.cli``: the same as the ``agentlog`` console script."""

from __future__ import annotations

from . import main

if __name__ == "__main__":
    raise SystemExit(main())
