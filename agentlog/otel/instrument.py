"""``al.instrument()``: one line that makes the agent you already have write into agentlog.

It installs agentlog's :class:`~agentlog.otel.processor.SpanProcessor` on the global tracer
provider (an SDK ``TracerProvider`` is created and made global if there is none) and turns on
the OpenInference instrumentors that are installed, as Phoenix's ``register(auto_instrument=True)``
does: every entry point of the ``openinference_instrumentor`` group (``openai``,
``openai_agents``, ``langchain``, ``anthropic``, ``llama_index``, ...) whose library is
installed too. From then on, spans of instrumented code that runs inside a recording land in
it as span events, live.

Other instrumentors (the OpenTelemetry GenAI ones, registered in the
``opentelemetry_instrumentor`` group) are turned on by name: ``instrumentors=["openai_v2"]``
would pick the entry point named so in either group; a distribution name
(``"opentelemetry-instrumentation-openai-v2"``) picks that distribution's entry point.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Final, Self

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from ..capture.recorder import SPAN_PARENTS
from .processor import SpanProcessor

__all__ = ["Instrumentation", "instrument"]

log = logging.getLogger("agentlog.otel")

#: The entry-point groups instrumentors register in: OpenInference's (turned on by default,
#: as Phoenix does) and OpenTelemetry's (every contrib instrumentor; turned on by name only).
OPENINFERENCE_GROUP: Final = "openinference_instrumentor"
OPENTELEMETRY_GROUP: Final = "opentelemetry_instrumentor"

_processors: weakref.WeakKeyDictionary[TracerProvider, SpanProcessor] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


@dataclass(slots=True)
class Instrumentation:
    """What :func:`instrument` did; :meth:`uninstrument` undoes it."""

    provider: TracerProvider
    """The tracer provider the processor is on (the global one)."""
    processor: SpanProcessor
    """agentlog's span processor on it."""
    instrumented: list[str] = field(default_factory=list)
    """The instrumentors turned on now (entry-point names)."""
    already: list[str] = field(default_factory=list)
    """The instrumentors that were on before (left as they were)."""
    skipped: dict[str, str] = field(default_factory=dict)
    """Instrumentors not turned on, and why (their library is not installed, it failed)."""
    _instrumentors: list[Any] = field(default_factory=list, repr=False)

    def uninstrument(self) -> None:
        """Turn off the instrumentors this call turned on and stop writing spans."""
        for instrumentor in self._instrumentors:
            instrumentor.uninstrument()
        self._instrumentors.clear()
        self.processor.enabled = False

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.uninstrument()


def _provider(given: Any) -> TracerProvider:
    if given is not None:
        if not isinstance(given, TracerProvider):
            raise TypeError(f"tracer_provider must be an OpenTelemetry SDK TracerProvider, got "
                            f"{type(given).__name__}")
        return given
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        return current
    provider = TracerProvider()
    trace.set_tracer_provider(provider)  # the instrumentors below are given it explicitly anyway
    return provider


def _processor(provider: TracerProvider) -> SpanProcessor:
    with _lock:
        processor = _processors.get(provider)
        if processor is None:
            processor = _processors[provider] = SpanProcessor()
            provider.add_span_processor(processor)
            SPAN_PARENTS.append(processor.open_span_id)  # the recorder's spans nest under its spans
        processor.enabled = True
        return processor


def _entry_points(names: Iterable[str] | None) -> list[metadata.EntryPoint]:
    """The entry points to load: OpenInference's group, or the ones named (either group)."""
    if names is None:
        return list(metadata.entry_points(group=OPENINFERENCE_GROUP))
    wanted = list(names)
    both = [*metadata.entry_points(group=OPENINFERENCE_GROUP), *metadata.entry_points(group=OPENTELEMETRY_GROUP)]
    out: list[metadata.EntryPoint] = []
    for name in wanted:
        found = [ep for ep in both if name in (ep.name, ep.dist.name if ep.dist else None)]
        by_dist = [ep for ep in found if ep.dist is not None and ep.dist.name == name]
        picked = by_dist or found[:1]
        if not picked:
            known = sorted({ep.name for ep in both} | {ep.dist.name for ep in both if ep.dist})
            raise KeyError(f"no instrumentor {name!r} is installed; installed: {', '.join(known) or 'none'}")
        for ep in picked:  # one instrumentor registered in both groups is one instrumentor
            if ep.value not in {o.value for o in out}:
                out.append(ep)
    return out


def instrument(*, instrumentors: Iterable[str] | None = None, tracer_provider: Any = None) -> Instrumentation:
    """Write the spans of instrumented frameworks into the active recording, live.

    Installs agentlog's :class:`~agentlog.otel.SpanProcessor` on the global tracer provider
    (creating an SDK provider if there is none) and turns on the installed OpenInference
    instrumentors. Calling it again is harmless: the processor is installed once per
    provider, and instrumentors already on stay as they are.

    Args:
        instrumentors: entry-point or distribution names to turn on (from the
            ``openinference_instrumentor`` or ``opentelemetry_instrumentor`` group); default:
            every ``openinference_instrumentor``.
        tracer_provider: an SDK ``TracerProvider`` to use instead of the global one.

    Returns:
        An :class:`Instrumentation` saying what was turned on; ``.uninstrument()`` undoes it.

    Raises:
        KeyError: a name in ``instrumentors`` is not installed (the message lists what is).

    Example::

        import agentlog as al
        al.instrument()                       # once, e.g. at the top of the notebook
        with al.recording(name="triage") as rec:
            graph.invoke({"messages": [...]})  # LangGraph, the Agents SDK, a plain client...
    """
    from opentelemetry.instrumentation.dependencies import DependencyConflictError

    provider = _provider(tracer_provider)
    done = Instrumentation(provider=provider, processor=_processor(provider))
    for ep in _entry_points(instrumentors):
        try:
            instrumentor = ep.load()()
            if instrumentor.is_instrumented_by_opentelemetry:
                done.already.append(ep.name)
                continue
            instrumentor.instrument(tracer_provider=provider, raise_exception_on_conflict=True)
        except DependencyConflictError as exc:
            done.skipped[ep.name] = f"its library is not installed ({exc.conflict})"
            continue
        except Exception as exc:  # noqa: BLE001 - one broken instrumentor must not stop the others
            done.skipped[ep.name] = f"{type(exc).__name__}: {exc}"
            log.warning("agentlog: instrumentor %s failed: %s", ep.name, exc)
            continue
        done.instrumented.append(ep.name)
        done._instrumentors.append(instrumentor)
    return done
