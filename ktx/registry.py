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

import argparse
import difflib
import importlib
import importlib.util
import json
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from ktx.ir.errors import KtxError, Location

from ktx.passbase import KNOB_NAME, OPTION_NAME, PASS_NAME, Pass, Phase

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
    if not isinstance(cls.phase, Phase):
        phases = ", ".join(f"Phase.{p.name}" for p in Phase)
        raise fail(f"phase must be one of {phases}, not {cls.phase!r}")
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
        load_env_plugins()
    return _DEFAULT


def register(cls: PassClass) -> PassClass:
    """Register a pass in the default registry; usable as a class decorator."""
    return default_registry().register(cls, replace=True)


#: Environment variable holding the plugins loaded in this process (``os.pathsep``-separated),
#: so that processes a command starts (``--workers``) load the same passes.
PLUGINS_ENV = "KTX_PLUGINS"
#: The file in a run folder that records its plugins, so that a resumed run or a replay of its
#: recording loads the same passes without being told again.
PLUGINS_FILE = "plugins.json"

_LOADED: list[str] = []


def _plugin_key(spec: str) -> str:
    """A ``.py`` plugin by its absolute path (so that another cwd finds it), a module by name."""
    return str(Path(spec).resolve()) if spec.endswith(".py") else spec


def loaded_plugins() -> tuple[str, ...]:
    """The plugins imported so far in this process, in order (absolute paths or module names)."""
    return tuple(_LOADED)


def load_plugin(spec: str) -> None:
    """Import ``spec`` (a ``.py`` file or a module name) so that its passes register.

    Loading the same plugin twice is a no-op. Any failure while importing it (missing file,
    syntax error, an exception at import time) is a :class:`KtxError`, one line naming the
    plugin and the error, so that the CLI exits 2 rather than printing a traceback.
    """
    key = _plugin_key(spec)
    if key in _LOADED:
        return
    path = Path(spec)
    if spec.endswith(".py"):
        if not path.is_file():
            raise KtxError("no such plugin file", Location(spec), "--plugin takes a .py file or a module")
        name = f"ktx_plugin_{path.stem}"
        module_spec = importlib.util.spec_from_file_location(name, path)
        if module_spec is None or module_spec.loader is None:
            raise KtxError(f"cannot load plugin {spec}")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        try:
            module_spec.loader.exec_module(module)
        except KtxError:
            sys.modules.pop(name, None)
            raise
        except BaseException as exc:  # any failure of user code at import time
            sys.modules.pop(name, None)
            if isinstance(exc, KeyboardInterrupt):
                raise
            raise KtxError(
                f"cannot import plugin: {_describe(exc, path)}", Location(spec), "fix the plugin file"
            ) from exc
    else:
        try:
            importlib.import_module(spec)
        except KtxError:
            raise
        except Exception as exc:
            raise KtxError(
                f"cannot import plugin {spec!r}: {_describe(exc, None)}",
                None,
                "give a .py file or an importable module name",
            ) from exc
    _LOADED.append(key)
    os.environ[PLUGINS_ENV] = os.pathsep.join(_LOADED)


def _describe(exc: BaseException, path: Path | None) -> str:
    """``SyntaxError: invalid syntax (line 3)``: the error on one line, with the plugin's line."""
    text = " ".join(str(exc).split()) or "(no message)"
    line = getattr(exc, "lineno", None) if isinstance(exc, SyntaxError) else None
    if line is None and path is not None:
        tb = exc.__traceback__
        while tb is not None:
            if Path(tb.tb_frame.f_code.co_filename).resolve() == path.resolve():
                line = tb.tb_lineno
            tb = tb.tb_next
    return f"{type(exc).__name__}: {text}" + (f" (line {line})" if line else "")


def load_plugins(specs: Iterable[str]) -> tuple[str, ...]:
    """Load each plugin in turn; returns all plugins loaded in this process."""
    for spec in specs:
        load_plugin(spec)
    return loaded_plugins()


def load_env_plugins() -> None:
    """Load the plugins a parent process recorded in ``KTX_PLUGINS`` (a ``--workers`` child)."""
    for spec in os.environ.get(PLUGINS_ENV, "").split(os.pathsep):
        spec = spec.strip()
        # A file the parent loaded and has since deleted (a test's temporary plugin) is not
        # this process's plugin: a pass it needed still fails, as an unknown pass.
        if spec and not (spec.endswith(".py") and not Path(spec).is_file()):
            load_plugin(spec)


def recorded_plugins(folder: Path) -> tuple[str, ...]:
    """The plugins a run folder recorded (none when it has no ``plugins.json``)."""
    path = folder / PLUGINS_FILE
    if not path.is_file():
        return ()
    from ktx.records.files import PluginsRecord

    return PluginsRecord.read(path).plugins


def record_plugins(folder: Path, plugins: Sequence[str]) -> None:
    """Write ``plugins.json`` into a run folder (only when there are plugins to record)."""
    if not plugins:
        return
    folder.mkdir(parents=True, exist_ok=True)
    merged = list(dict.fromkeys([*recorded_plugins(folder), *plugins]))
    from ktx.records.files import PluginsRecord

    record = PluginsRecord(tuple(merged)).to_json()
    (folder / PLUGINS_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


def add_plugin_option(parser: argparse.ArgumentParser) -> None:
    """The ``--plugin FILE.py|MODULE`` option every command that runs passes takes."""
    parser.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="FILE.py|MODULE",
        help="load passes from a Python file or module first (repeatable; recorded in the run folder)",
    )


def plugins_for_run(cli: Sequence[str], folders: Iterable[Path]) -> tuple[str, ...]:
    """Load the ``--plugin`` ones and those recorded in ``folders`` (a run folder being resumed,
    the folder of a replayed recording); returns every plugin now loaded, to be recorded."""
    for folder in folders:
        load_plugins(recorded_plugins(folder))
    return load_plugins(cli)


def run_plugins(cli: Sequence[str], run_dir: Path, backend: str = "") -> tuple[str, ...]:
    """Plugins of a ``tune``/``optimize`` run: those recorded in ``run_dir`` (a resumed run) and
    beside a replayed recording (``replay:FILE``), then ``--plugin``; all of them are recorded
    in ``run_dir/plugins.json`` so that the next resume, a worker or a replay loads them too."""
    folders = [run_dir]
    if backend.startswith("replay:"):
        folders.append(Path(backend.split(":", 1)[1]).parent)
    plugins = plugins_for_run(cli, folders)
    record_plugins(run_dir, plugins)
    return plugins
