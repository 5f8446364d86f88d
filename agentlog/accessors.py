"""Methods that the layers above attach to the classes of the layers below, resolved on first use.

``Run`` and ``Store`` (:mod:`agentlog.store`) are handles of storage and state. Their tables
(``run.cost()``, ``store.runs()``) live in :mod:`agentlog.analysis` and their views
(``run.waterfall()``, ``run._repr_html_()``) in :mod:`agentlog.widgets`, layers the store may
not import, not even inside a function. So the names are registered here, as
``"module:function"`` strings, by the package above every layer (``agentlog/__init__.py``,
which Python runs before any ``agentlog.*`` module), and a class that derives from
:class:`Extensible` finds them in ``__getattr__`` and imports the module the first time a
name is used. This is xarray's accessor pattern (``register_dataset_accessor``) with lazy
imports, so ``import agentlog`` stays fast.

>>> class Box(Extensible):
...     _accessor_owner = "doc.Box"
...     def __init__(self, n: int) -> None:
...         self.n = n
>>> register("doc.Box", "fields", "builtins:vars")  # any "module:function" taking the object first
>>> register("doc.Box", "text", "builtins:repr", kind="property")
>>> Box(3).fields(), "fields" in dir(Box(3)), Box(3).text.startswith("<")
({'n': 3}, True, True)

The function receives the object as its first argument: ``run.cost(by="model")`` calls
``agentlog.analysis.accessors.cost(run, by="model")``. A *property* is called with the object
alone when the attribute is read (``run.events``).

Pure: no I/O; the only import is the registered module, on first use.
"""

from __future__ import annotations

import importlib
import sys
import threading
import types
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

__all__ = ["Accessor", "Extensible", "accessors", "register"]

Kind = Literal["method", "property"]


@dataclass(frozen=True, slots=True)
class Accessor:
    """One registered name: where its function lives and how it is called."""

    name: str
    """The attribute name, e.g. ``cost``."""
    target: str
    """``"module:function"``; the function takes the object first."""
    kind: Kind = "method"
    """``method`` (bound to the object) or ``property`` (called when the attribute is read)."""
    def function(self) -> Callable[..., Any]:
        """The registered function, imported on first use (looked up on every call, so a
        patched module attribute is what runs).

        Raises:
            ImportError, AttributeError: the target does not exist (a broken registration).
        """
        module_name, _, attr = self.target.partition(":")
        module = sys.modules.get(module_name) or importlib.import_module(module_name)
        func: Callable[..., Any] = getattr(module, attr)
        return func

    def bind(self, obj: Any) -> Any:
        """What ``obj.<name>`` is: the bound method, or the property's value."""
        func = self.function()
        if self.kind == "property":
            return func(obj)
        return types.MethodType(func, obj)


_lock = threading.Lock()
_registry: dict[str, dict[str, Accessor]] = {}


def register(owner: str, name: str, target: str, *, kind: Kind = "method") -> None:
    """Attach ``target`` (``"module:function"``) to the class registered as ``owner`` as
    attribute ``name``. Registering a name again replaces it, with a warning.

    Raises:
        ValueError: ``target`` is not ``"module:function"``, or ``kind`` is unknown.
    """
    module_name, sep, attr = target.partition(":")
    if not (module_name and sep and attr):
        raise ValueError(f"target must be 'module:function', got {target!r}")
    if kind not in ("method", "property"):
        raise ValueError(f"kind must be 'method' or 'property', got {kind!r}")
    with _lock:
        names = _registry.setdefault(owner, {})
        old = names.get(name)
        if old is not None and (old.target, old.kind) != (target, kind):
            warnings.warn(f"{owner}.{name} was {old.target}; now {target}", UserWarning, stacklevel=2)
        names[name] = Accessor(name, target, kind)


def accessors(owner: str) -> Mapping[str, Accessor]:
    """The names registered for ``owner`` (a copy)."""
    with _lock:
        return dict(_registry.get(owner, {}))


class Extensible:
    """A class whose registered names (:func:`register`) are resolved by ``__getattr__``.

    Subclasses set ``_accessor_owner``. Attributes the class defines win over registered
    names; names with leading double underscores are never looked up (copy and pickle probe
    for those).
    """

    __slots__ = ()
    _accessor_owner: ClassVar[str] = ""

    if not TYPE_CHECKING:  # mypy sees each class's typed stubs instead, so typos still fail

        def __getattr__(self, name: str) -> Any:
            if not name.startswith("__"):
                found = _registry.get(type(self)._accessor_owner, {}).get(name)
                if found is not None:
                    return found.bind(self)
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __dir__(self) -> list[str]:
        names = set(object.__dir__(self))
        names.update(_registry.get(type(self)._accessor_owner, {}))
        return sorted(names)
