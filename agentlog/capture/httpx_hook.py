"""The process-wide patch of httpx's transports, applied without importing httpx.

Every recording, replay and fork calls :func:`install` as it starts. httpx (about 60 ms to
import) and its fork httpx2 (about 30 ms) are patched at once if the program imported them
already; otherwise an import hook patches each one as it is imported, so a program (or a tool
of a resumed run) that imports httpx later is recorded all the same, and a program that never
sends a request never pays for importing httpx. The recording itself lives in
:mod:`agentlog.capture.transport`, imported by the first request a recorder sees.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Final

from .effects import arun, inside_recorded_call, run
from .recorder import Recorder, active_recorder

__all__ = ["HTTPX_MODULES", "install", "installed", "uninstall"]

#: The httpx distributions patched: ``httpx`` and its fork ``httpx2`` (the one the OpenAI,
#: Anthropic and Agents SDKs import), whichever are installed. Their classes are separate, so
#: each is patched with its own ``Request`` and ``Response`` types.
HTTPX_MODULES: Final = ("httpx", "httpx2")


@dataclass(frozen=True, slots=True)
class _Patch:
    module: Any
    sync: Callable[..., Any]
    async_: Callable[..., Any]
    patched_sync: Callable[..., Any]
    patched_async: Callable[..., Any]


_patches: dict[str, _Patch] = {}
_install_lock = threading.RLock()
_armed = False  # install() ran and uninstall() did not: patch each module as it is imported


def _recording_here() -> Recorder | None:
    """The recorder that should record a request sent here, if any."""
    rec = active_recorder()
    if rec is None or not rec.capture_http or inside_recorded_call():
        return None
    return rec


def _patch(module: Any) -> _Patch:
    original_sync = module.HTTPTransport.handle_request
    original_async = module.AsyncHTTPTransport.handle_async_request

    def handle_request(self: Any, request: Any) -> Any:
        rec = _recording_here()
        if rec is None:
            return original_sync(self, request)
        from .transport import exchange

        def send(request: Any) -> Any:
            response = original_sync(self, request)
            response.read()
            return response

        return run(exchange(rec, request, request.read(), send, http=module,
                            open_stream=lambda request: original_sync(self, request)))

    async def handle_async_request(self: Any, request: Any) -> Any:
        rec = _recording_here()
        if rec is None:
            return await original_async(self, request)
        from .transport import exchange

        async def send(request: Any) -> Any:
            response = await original_async(self, request)
            await response.aread()
            return response

        async def open_stream(request: Any) -> Any:
            return await original_async(self, request)

        return await arun(exchange(rec, request, await request.aread(), send, http=module,
                                   open_stream=open_stream))

    return _Patch(module, original_sync, original_async, handle_request, handle_async_request)


def _apply(module: ModuleType) -> None:
    """Patch one imported httpx module (its original methods kept once, for uninstall)."""
    with _install_lock:
        patch = _patches.get(module.__name__)
        if patch is None or patch.module is not module:
            patch = _patches[module.__name__] = _patch(module)
        module.HTTPTransport.handle_request = patch.patched_sync
        module.AsyncHTTPTransport.handle_async_request = patch.patched_async


class _ThenPatch:
    """A module's own loader, then :func:`_apply` once the module has run; afterwards the
    module names its own loader again, as if it had been imported plainly."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def create_module(self, spec: Any) -> ModuleType | None:
        create = getattr(self.loader, "create_module", None)
        return None if create is None else create(spec)

    def exec_module(self, module: ModuleType) -> None:
        spec = module.__spec__
        if spec is not None:
            spec.loader = self.loader
        module.__loader__ = self.loader
        self.loader.exec_module(module)
        if _armed:
            _apply(module)

    def __getattr__(self, name: str) -> Any:  # get_code, is_package, resources ...: the loader's
        return getattr(self.loader, name)


class _PatchOnImport:
    """A finder (first on ``sys.meta_path``) that finds httpx and httpx2 as the finders after
    it would, and patches each as it loads. (Plain classes, not ``importlib.abc``'s: that
    module costs more to import than this one saves.)"""

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> Any:
        if fullname not in HTTPX_MODULES or not _armed:
            return None
        for finder in sys.meta_path:
            if finder is self or isinstance(finder, _PatchOnImport):
                continue
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find is not None else None
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _ThenPatch(spec.loader)
                return spec
        return None


_HOOK = _PatchOnImport()


def install() -> None:
    """Patch httpx's transports once, process-wide (``httpx.HTTPTransport.handle_request`` and
    ``AsyncHTTPTransport.handle_async_request``, the way respx and vcrpy do; ``httpx2`` too when
    it is installed), so that every request sent inside a recording, by any client created
    before or inside it, is recorded, and served from the log on replay.

    A module not imported yet is not imported here: an import hook patches it when the
    program imports it. Called by every recording, replay and fork as it starts; harmless to
    call again. Outside a recording (or in one made with ``capture_http=False``) a request
    passes through untouched, at the cost of one context-variable lookup.
    """
    global _armed
    with _install_lock:
        _armed = True
        if _HOOK not in sys.meta_path:
            sys.meta_path.insert(0, _HOOK)
        for name in HTTPX_MODULES:
            module = sys.modules.get(name)
            if module is not None and hasattr(module, "AsyncHTTPTransport"):
                _apply(module)


def uninstall() -> None:
    """Put httpx's transports back as they were, and stop patching on import (for benchmarks
    and tests)."""
    global _armed
    with _install_lock:
        _armed = False
        if _HOOK in sys.meta_path:
            sys.meta_path.remove(_HOOK)
        for patch in _patches.values():
            patch.module.HTTPTransport.handle_request = patch.sync
            patch.module.AsyncHTTPTransport.handle_async_request = patch.async_


def installed() -> bool:
    """True while requests sent through httpx are recorded inside a recording: httpx's
    transports are patched, or httpx is not imported yet and will be patched when it is."""
    if not _armed:
        return False
    module = sys.modules.get("httpx")
    if module is None:
        from importlib.util import find_spec
        return find_spec("httpx") is not None
    patch = _patches.get("httpx")
    return patch is not None and module.HTTPTransport.handle_request is patch.patched_sync
