"""Plain, strict registries (shaped like veRL's core_algos): a dict and a ``register`` decorator.

Registering a name twice raises; asking for an unknown name raises and lists the valid ones.
Detectors, estimators, importers and renderers all use this shape.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

__all__ = ["Plugins", "Registry", "import_module", "lazy_exports"]

T = TypeVar("T")


class Registry(Generic[T]):
    """A named collection of ``T``; ``kind`` names what is registered, for error messages.

    >>> r = Registry("estimator")
    >>> @r.register("x")
    ... def f(): ...
    >>> r.get("x") is f, r.names()
    (True, ['x'])
    """

    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def deco(obj: T) -> T:
            self.add(name, obj)
            return obj

        return deco

    def add(self, name: str, obj: T) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"{self.kind} name must be a non-empty string, got {name!r}")
        if name in self._items:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._items[name] = obj

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            valid = ", ".join(sorted(self._items)) or "(none)"
            raise KeyError(f"unknown {self.kind} {name!r}; valid: {valid}") from None

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._items))

    def __len__(self) -> int:
        return len(self._items)


def import_module(name: str) -> Any:
    """The module ``name``, imported with the ``import`` statement's machinery.

    Unlike :func:`importlib.import_module` (pure Python), ``__import__`` goes through CPython's
    C import path, so the lazily loaded modules show up in ``python -X importtime``.
    """
    __import__(name)
    return sys.modules[name]


def lazy_exports(namespace: dict[str, Any], table: dict[str, str]) -> tuple[Callable, Callable]:
    """``(__getattr__, __dir__)`` of a package whose public names load on first use (PEP 562):
    ``table`` maps each name to the module it is imported from; the value is then kept in
    ``namespace`` (the package's ``globals()``), so the next access is a plain lookup.

    >>> ns = {"__name__": "pkg"}
    >>> getattr_, dir_ = lazy_exports(ns, {"Registry": "rlvitals.registry"})
    >>> getattr_("Registry").__name__, "Registry" in ns, dir_()
    ('Registry', True, ['Registry', '__name__'])
    """

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
        value = getattr(import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *table})

    return __getattr__, __dir__


class Plugins:
    """Modules of ``package`` whose import registers things, imported together on first use.

    Keeps ``import rlvitals.<package>`` cheap: the catalogue is read only when asked for. The
    set counts as loaded while it loads, so a module that asks for the catalogue during its own
    import does not recurse; a failed import leaves it unloaded (modules that did import are
    cached by Python and not registered twice).
    """

    def __init__(self, package: str, modules: tuple[str, ...]):
        self.package = package
        self.modules = modules
        self._loaded = False

    def load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        try:
            for name in self.modules:
                import_module(f"{self.package}.{name}")
        except BaseException:
            self._loaded = False
            raise
