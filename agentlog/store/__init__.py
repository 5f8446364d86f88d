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

from .blobs import BlobStore
from .gc import GCReport
from .push import PushReport
from .repair import RepairReport
from .run import Run
from .segments import SCHEMA, SCHEMA_VERSION
from .store import Store, open
from .verify import VerifyReport
from .wal import Durability, TornWALWarning
from .writer import RunWriter

__all__ = ["SCHEMA", "SCHEMA_VERSION", "BlobStore", "Durability", "GCReport", "PushReport", "RepairReport",
           "Run", "RunWriter", "Store", "TornWALWarning", "VerifyReport", "open"]
