"""Shared test fixtures and selection rules.

* ``gpu``: tests marked so skip unless CuPy sees a CUDA device.
* ``slow``: tests marked so (nvcc sweeps, end-to-end CLI runs, mypy) are left out of a run over
  directories, so the README's ``pytest -q -n 2`` stays a few minutes on two cores; ``pytest -m slow``
  runs them (``.ci/run`` does, after the main command). A run that chooses its own tests keeps
  them: any ``-m`` or ``-k`` expression, or a file or node id named on the command line.
* pytest-xdist (the README's ``-n 2 --dist loadscope``): each worker collects and deselects the
  same way; a module stays on one worker, so its module fixtures are made once. Workers put the
  slowest modules first (:data:`_FIRST`) so that neither worker is left with a long one at the
  end, and report their slow count to the controller for the closing line.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest


@functools.cache
def gpu_skip_reason() -> str | None:
    """None when a CUDA device is usable through CuPy, else why not."""
    try:
        import cupy

        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # no CuPy, no driver, no device
        return f"no GPU ({type(exc).__name__}: {str(exc).splitlines()[0][:80]})"
    return None if count > 0 else "no GPU (no CUDA device)"


@pytest.fixture
def gpu() -> None:
    reason = gpu_skip_reason()
    if reason:
        pytest.skip(reason)


ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def replayed_optimize(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run folder of ``ktx optimize`` on silu_and_mul replayed from its committed H200
    recording (4 rounds of 16 trials, seed 0), then ``ktx report`` and ``ktx export --torch``
    (``torch/`` inside it). One run for the session: tests/test_shipped.py and
    tests/commands/test_export.py each made the same one (about 15 s of CPU each). Tests copy it
    before changing anything."""
    from ktx.cli import main

    silu = ROOT / "kernels" / "silu_and_mul"
    run = tmp_path_factory.mktemp("replayed_optimize") / "run"
    rec = silu / "recorded" / "optimize" / "quick_h200_2026-11-21.json"
    argv = ["optimize", str(silu), "--backend", f"replay:{rec}", "--shapes", "quick", "--rounds", "4",
            "--trials-per-round", "16", "--seed", "0", "--ncu", "off", "--out", str(run)]  # fmt: skip
    assert main(argv) == 0
    assert main(["report", str(run)]) == 0
    assert main(["export", str(run), "--torch"]) == 0
    return run


#: How many slow tests this run left out, for the closing summary.
_SLOW_LEFT_OUT = pytest.StashKey[int]()

#: Test modules an xdist run hands out first, slowest first (CPU seconds of their tests and module
#: fixtures, measured): loadscope sends whole modules in collection order, so a long module
#: collected last would leave one worker idle while the other finishes it.
_FIRST = (
    "tests/test_lint.py",  # mypy, cold cache: the slowest test
    "tests/agent/test_loop.py",
    "tests/agent/test_suite_smoke.py",
    "tests/agent/test_keep_going.py",
)


def _relative(path: Path) -> str:
    try:
        return path.relative_to(ROOT).as_posix()
    except ValueError:
        return str(path)


def _xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _named_files(config: pytest.Config) -> set[Path]:
    """Test files named on the command line (alone or in a node id), as absolute paths."""
    files: set[Path] = set()
    for arg in config.args:
        path = Path(config.invocation_params.dir, arg.split("::", 1)[0]).resolve()
        if path.is_file():
            files.add(path)
    return files


def _deselect_slow(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave ``slow`` tests out unless the command line chose tests itself (see the docstring)."""
    if config.option.markexpr or config.option.keyword:
        return
    named = _named_files(config)
    slow = [item for item in items if item.get_closest_marker("slow") and item.path.resolve() not in named]
    if slow:
        config.hook.pytest_deselected(items=slow)
        gone = {id(item) for item in slow}
        items[:] = [item for item in items if id(item) not in gone]
        config.stash[_SLOW_LEFT_OUT] = len(slow)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Slow tests leave a directory run; a module's ``start_early(item)`` is called for each test
    that stays; tests marked ``gpu`` skip themselves without one."""
    _deselect_slow(config, items)
    if _xdist_worker(config):  # every worker sorts alike (xdist checks that they collect the same)
        rank = {name: i for i, name in enumerate(_FIRST)}
        items.sort(key=lambda item: rank.get(_relative(item.path), len(rank)))
        if _SLOW_LEFT_OUT in config.stash:
            config.workeroutput["ktx_slow_left_out"] = config.stash[_SLOW_LEFT_OUT]  # type: ignore[attr-defined]
    for item in items:  # a test module may start a long subprocess now (tests/test_lint.py: mypy)
        start = getattr(getattr(item, "module", None), "start_early", None)
        if callable(start):
            start(item)
    marked = [item for item in items if item.get_closest_marker("gpu")]
    if not marked:
        return
    reason = gpu_skip_reason()
    if reason:
        for item in marked:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: object, error: object) -> None:
    """xdist controller: take a worker's slow count (every worker deselects the same tests)."""
    output = getattr(node, "workeroutput", {})
    if "ktx_slow_left_out" in output:
        node.config.stash[_SLOW_LEFT_OUT] = output["ktx_slow_left_out"]  # type: ignore[attr-defined]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """Say how to run what ``slow`` left out, so a green run is not mistaken for all of it."""
    left_out = config.stash.get(_SLOW_LEFT_OUT, 0)
    if left_out:
        terminalreporter.write_line(f"{left_out} slow tests left out; run them with: pytest -m slow")
