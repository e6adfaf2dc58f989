"""The pass registry: built-ins, entry-point plugins and passes registered at run time.

Registration checks a pass's metadata once (MLIR-style), so that a malformed pass fails when
it is loaded, with a message naming the pass, rather than halfway through a pipeline.

Third-party passes are found three ways:

* the ``ktx.passes`` entry-point group of installed packages
  (``[project.entry-points."ktx.passes"] my-pass = "my_pkg.passes:MyPass"``);
* ``--plugin FILE.py`` or ``--plugin package.module`` on the command line, which imports the
  code (it registers its passes with :func:`register`);
* :func:`register` from Python, usable as a class decorator.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import sys
from collections.abc import Iterator
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from ktx.errors import KtxError
from ktx.passbase import KNOB_NAME, OPTION_NAME, PASS_NAME, Pass

PassClass = type[Pass[Any]]
ENTRY_POINT_GROUP = "ktx.passes"


class PassDefinitionError(KtxError):
    """A pass class whose metadata is malformed (a bug in the pass, found at registration)."""


def check_pass(cls: PassClass) -> None:
    """Validate a pass class's declared metadata; raise :class:`PassDefinitionError` if wrong."""

    def fail(what: str) -> PassDefinitionError:
        return PassDefinitionError(f"pass {cls.__name__} ({cls.name or 'unnamed'}): {what}")

    if not isinstance(cls, type) or not issubclass(cls, Pass):
        raise PassDefinitionError(f"{cls!r} is not a subclass of ktx.passbase.Pass")
    if not PASS_NAME.match(cls.name or ""):
        raise fail("name must be kebab-case, like 'block-size'")
    if not cls.summary or "\n" in cls.summary or len(cls.summary) > 120:
        raise fail("summary must be one line of at most 120 characters")
    if cls.sites is Pass.sites or cls.rewrite is Pass.rewrite:
        raise fail("must implement sites() and rewrite()")
    seen: set[str] = set()
    for opt in cls.options:
        if not OPTION_NAME.match(opt.name) or opt.name in seen:
            raise fail(f"option {opt.name!r} must be a unique lower-case name")
        seen.add(opt.name)
        if not opt.help:
            raise fail(f"option {opt.name!r} needs help text")
        if not _fits(opt.kind, opt.default):
            raise fail(f"option {opt.name!r}: default {opt.default!r} is not of kind {opt.kind}")
    for spec in cls.knobs:
        stem = spec.name.split("<", 1)[0].rstrip("_") or "X"
        if not KNOB_NAME.match(stem) or not spec.help:
            raise fail(f"knob {spec.name!r} needs an upper-case name and help")
    for field_name in ("requires", "after", "prefer_after", "conflicts"):
        for other in getattr(cls, field_name):
            if not PASS_NAME.match(other):
                raise fail(f"{field_name} names {other!r}, which is not a pass name")
            if other == cls.name:
                raise fail(f"{field_name} names the pass itself")
    if set(cls.requires) & set(cls.conflicts):
        raise fail("a pass cannot both require and conflict with the same pass")


def _fits(kind: str, value: object) -> bool:
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "str":
        return isinstance(value, str)
    if kind == "ints":
        return isinstance(value, tuple) and all(isinstance(v, int) for v in value)
    if kind == "strs":
        return isinstance(value, tuple) and all(isinstance(v, str) for v in value)
    return False


class Registry:
    """Pass classes by name."""

    def __init__(self) -> None:
        self._passes: dict[str, PassClass] = {}

    def register(self, cls: PassClass, *, replace: bool = False) -> PassClass:
        check_pass(cls)
        existing = self._passes.get(cls.name)
        if existing is not None and existing is not cls and not replace:
            raise PassDefinitionError(
                f"pass name {cls.name!r} is taken by {existing.__module__}.{existing.__qualname__}"
            )
        self._passes[cls.name] = cls
        return cls

    def get(self, name: str) -> PassClass:
        cls = self._passes.get(name)
        if cls is None:
            close = difflib.get_close_matches(name, self._passes, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise KtxError(
                f"unknown pass {name!r}",
                None,
                f"{hint}passes: {', '.join(sorted(self._passes))}",
            )
        return cls

    def __contains__(self, name: object) -> bool:
        return name in self._passes

    def __iter__(self) -> Iterator[PassClass]:
        return iter(sorted(self._passes.values(), key=lambda c: c.name))

    def names(self) -> list[str]:
        return sorted(self._passes)


_DEFAULT: Registry | None = None


def default_registry() -> Registry:
    """Built-ins plus the ``ktx.passes`` entry points, loaded on first use."""
    global _DEFAULT
    if _DEFAULT is None:
        registry = Registry()
        from ktx.passes import BUILTINS

        for cls in BUILTINS:
            registry.register(cls)
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            loaded = ep.load()
            for cls in loaded if isinstance(loaded, list | tuple) else [loaded]:
                registry.register(cls)
        _DEFAULT = registry
    return _DEFAULT


def register(cls: PassClass) -> PassClass:
    """Register a pass in the default registry; usable as a class decorator."""
    return default_registry().register(cls, replace=True)


def load_plugin(spec: str) -> None:
    """Import ``spec`` (a ``.py`` file or a module name) so that its passes register."""
    path = Path(spec)
    if spec.endswith(".py"):
        if not path.is_file():
            raise KtxError("no such plugin file", None, f"--plugin {spec}")
        name = f"ktx_plugin_{path.stem}"
        module_spec = importlib.util.spec_from_file_location(name, path)
        if module_spec is None or module_spec.loader is None:
            raise KtxError(f"cannot load plugin {spec}")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        module_spec.loader.exec_module(module)
        return
    try:
        importlib.import_module(spec)
    except ImportError as exc:
        raise KtxError(
            f"cannot import plugin {spec!r}: {exc}", None, "give a .py file or a module name"
        ) from exc
