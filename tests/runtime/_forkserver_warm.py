"""Imported only by the forkserver of the runtime tests (see conftest.py): load what a first
run loads lazily, so that the children forked from the server start in milliseconds."""

from __future__ import annotations

import _runtime_helpers

_runtime_helpers.warm_up()
