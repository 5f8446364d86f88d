"""Runs in and out of other formats: JSONL exports, OTLP traces, ActiveGraph and drangue logs.

=============================  =================================================================
function                       what it reads or writes
=============================  =================================================================
:func:`export_jsonl`           a run as JSONL: header, events, blobs; lossless
:func:`import_jsonl`           a JSONL export back into a store, with identical hashes
:func:`export_otlp`            a run as an OTLP/JSON ``ExportTraceServiceRequest`` (GenAI semconv)
:func:`write_otlp`             the same, written to a file
:func:`import_otlp`            OTLP JSON, ConsoleSpanExporter output, OpenInference spans: a run
                               per trace
:func:`import_activegraph`     an ActiveGraph run (SQLite store or JSONL trace);
                               :func:`activegraph_runs` lists a file's runs
:func:`import_drangue`         a drangue run (its SQLite store); :func:`drangue_runs` lists them
=============================  =================================================================

Each format's module docstring says what maps cleanly and what does not.
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
