"""ktx from Python: the same work as the commands, returning the objects they print from.

Tools that import ktx (a build system, a notebook, a serving framework's kernel registry) should
not shell out and parse tables: :func:`apply` returns the :class:`~ktx.template.Template` that
``ktx apply`` prints, :func:`tune` the :class:`~ktx.search.report.Summary` behind ``ktx tune``'s
table, :func:`optimize` the :class:`~ktx.agent.loop.OptimizeResult` behind ``ktx optimize``'s,
and :func:`init` the :class:`~ktx.draft.Draft` ``ktx init`` writes. Errors are
:class:`~ktx.ir.errors.KtxError`, as on the command line. See ``docs/api.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ktx.ir.errors import KtxError

if TYPE_CHECKING:
    from ktx.agent.loop import OptimizeResult
    from ktx.draft import Draft
    from ktx.search.report import Summary
    from ktx.template import Template


def apply(
    source: str | Path,
    passes: str,
    *,
    kernel: str | None = None,
    plugins: Sequence[str] = (),
) -> Template:
    """Template ``kernel`` of ``source`` with ``passes``; ``.instantiate(config)`` gives CUDA."""
    from ktx.ir import parse_file

    from ktx.pipeline import run
    from ktx.registry import load_plugins

    load_plugins(plugins)
    return run(parse_file(source), passes, kernel=kernel)


def tune(
    kernel_dir: str | Path,
    passes: str = "",
    *,
    plugins: Sequence[str] = (),
    **options: Any,
) -> Summary:
    """Search the knobs of ``passes`` per shape, as ``ktx tune``; ``options`` are the fields of
    :class:`ktx.search.runner.TuneRequest` (``shapes``, ``trials``, ``backend="replay:FILE"``,
    ``out``, ``seed``, ...)."""
    from ktx.registry import run_plugins
    from ktx.search.runner import TuneRequest
    from ktx.search.workers import run_tune
    from ktx.specload import load_spec

    _check_options(TuneRequest, options)
    out = options.get("out") or Path(".ktx") / "runs" / load_spec(kernel_dir).name
    run_plugins(plugins, Path(out), str(options.get("backend", "cupy")))
    request = TuneRequest(kernel_dir=Path(kernel_dir), passes=passes, **_shapes(options))
    summary = run_tune(request)
    if summary is None:  # pragma: no cover - only worker processes get None
        raise KtxError("tune returned no summary (a worker process)")
    return summary


def optimize(kernel_dir: str | Path, *, plugins: Sequence[str] = (), **options: Any) -> OptimizeResult:
    """The agent loop on one kernel, as ``ktx optimize``; ``options`` are the fields of
    :class:`ktx.agent.loop.OptimizeRequest` (``rounds``, ``trials_per_round``, ``shapes``,
    ``backend``, ``out``, ``seed``, ``planner``, ...)."""
    from ktx.agent.loop import OptimizeRequest
    from ktx.agent.loop import optimize as run_optimize
    from ktx.registry import run_plugins
    from ktx.specload import load_spec

    _check_options(OptimizeRequest, options)
    out = options.get("out") or Path(".ktx") / "optimize" / load_spec(kernel_dir).name
    run_plugins(plugins, Path(out), str(options.get("backend", "cupy")))
    return run_optimize(OptimizeRequest(kernel_dir=Path(kernel_dir), **_shapes(options)))


def init(source: str | Path, kernel: str | None = None, out: str | Path | None = None) -> Draft:
    """Draft the ``ktx.toml`` of ``kernel`` in ``source`` (``source`` relative to ``out``)."""
    from ktx.draft import draft

    return draft(source, kernel, out)


def _check_options(request: type, options: Mapping[str, Any]) -> None:
    known = {f.name for f in fields(request)} - {"kernel_dir", "passes"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise KtxError(f"unknown option(s) {', '.join(unknown)}", None, f"known: {', '.join(sorted(known))}")


def _shapes(options: Mapping[str, Any]) -> dict[str, Any]:
    """``shapes="quick"`` as well as ``shapes=("quick",)``; ``out`` as a string or a path."""
    data = dict(options)
    if isinstance(data.get("shapes"), str):
        data["shapes"] = tuple(s for s in data["shapes"].split(";") if s)
    if isinstance(data.get("out"), str):
        data["out"] = Path(data["out"])
    return data
