"""Runs in and out of other formats: JSONL exports, OTLP traces, ActiveGraph and drangue logs.

=============================  =================================================================
function                       what it reads or writes
=============================  =================================================================
:func:`export_jsonl`           a run as JSONL: header, events, blobs; lossless
:func:`import_jsonl`           a JSONL export back into a store, with identical hashes
:func:`export_otlp`            a run as an OTLP/JSON ``ExportTraceServiceRequest`` (GenAI semconv)
:func:`write_otlp`             the same, written to a file
:func:`import_otlp`            OTLP JSON, ConsoleSpanExporter output, OpenInference spans: a run
                               per trace (``otlp-<trace id>``)
:func:`import_activegraph`     the runs of an ActiveGraph file (SQLite store or JSONL trace);
                               :func:`activegraph_runs` lists them
:func:`import_drangue`         the runs of a drangue SQLite store; :func:`drangue_runs` lists them
=============================  =================================================================

Each format's module docstring says what maps cleanly and what does not. The importers write
agentlog's typed events (:mod:`agentlog.events`) and keep the source's own data in one place:
the source event under ``origin`` (:class:`~agentlog.events.Origin`) for drangue and
ActiveGraph, a span's attributes and ids in ``span.started`` for OTLP (the one mapping of a
span, shared with the live processor, is :mod:`agentlog.interop.spanmap`). Every importer is
idempotent: importing the same trace or run again adds nothing, and an import of a file that
holds more of it (more spans, later events) adds what is new. Imported runs cannot be replayed
or forked (:attr:`agentlog.Run.replayable`).
"""

from __future__ import annotations

from .activegraph import activegraph_runs, import_activegraph
from .drangue import drangue_runs, import_drangue
from .errors import InteropError, InteropFormatError, InteropIntegrityError
from .jsonl import export_jsonl, import_jsonl
from .otlp import export_otlp, import_otlp, write_otlp

__all__ = ["InteropError", "InteropFormatError", "InteropIntegrityError", "activegraph_runs",
           "drangue_runs", "export_jsonl", "export_otlp", "import_activegraph", "import_drangue",
           "import_jsonl", "import_otlp", "write_otlp"]
