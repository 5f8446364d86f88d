"""The run store: everything agentlog reads from and writes to disk.

::

    <store>/
      runs/run_id=<id>/   run.json · wal.jsonl · events-<first seq>.parquet · .lock
      blobs/sha256/ab/cdef…

A store may be a URL (``s3://bucket/prefix``, any fsspec filesystem): read-only for recording,
filled by ``store.push(url)`` (:mod:`.push`), read through :mod:`.fsys`.

>>> import tempfile, agentlog.store as st
>>> store = st.Store(tempfile.mkdtemp())
>>> with store.create_run(name="hello", run_id="hello-1") as w:
...     _ = w.emit("note", {"text": "hi"})
>>> run = store.run("hello")
>>> len(run), run.event(0).payload, run.verify().ok
(1, {'text': 'hi'}, True)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._lazy import lazy_getattr
from .blobs import BlobStore
from .run import Run
from .segments import SCHEMA, SCHEMA_VERSION
from .store import Store, open
from .wal import Durability, TornWALWarning
from .writer import RunWriter

if TYPE_CHECKING:  # pragma: no cover
    from .gc import GCReport
    from .push import PushReport
    from .repair import RepairReport
    from .verify import VerifyReport

__all__ = ["SCHEMA", "SCHEMA_VERSION", "BlobStore", "Durability", "GCReport", "PushReport", "RepairReport",
           "Run", "RunWriter", "Store", "TornWALWarning", "VerifyReport", "open"]

# The reports of the store's maintenance jobs, imported when first named: reading and writing
# runs (a resume, a recording) never loads garbage collection, push, repair or verify.
_LAZY: dict[str, str] = {"GCReport": "gc", "PushReport": "push", "RepairReport": "repair",
                         "VerifyReport": "verify"}

__getattr__ = lazy_getattr(__name__, _LAZY)
