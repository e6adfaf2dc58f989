"""Where one evaluation's host-side seconds go, on a CPU (issue 23 item 6: the overhead of one
evaluation at most 0.2 s plus 30x the kernel's time).

Runs ``ktx tune`` in this process (``--jobs 1``) on a kernel of the suite with a stand-in GPU
worker (this file's :func:`handle`): the worker process, the protocol, the compiles (real nvcc,
cache cold then warm), the Optuna study and sampler, the measurement cache and the run log are
ktx's own; only the GPU is modelled. The stand-in sleeps what a timing-only request's launches
take on a GPU by ktx's own count (:func:`ktx.measure.cost.timing_seconds`: the launches of
:func:`ktx.measure.gpu._time` at the kernel's time, with the host's per-launch cost) and reports
it as ``time_s``. Every call of the parts below is timed; a part's seconds exclude the parts it
calls (a stack per thread, the main thread's parts only):

* ``compile``: waiting for a compile (``CompilePool.result``); the compiles themselves run in
  processes beside;
* ``worker start``: starting the worker process (until it can take a request);
* ``worker``: a request to the worker process and its reply (``Supervisor.call``), less the
  seconds the worker reports for its own work (``costs``: warm-up, verification, timing): the
  process boundary, JSON, loading the modules before the first step;
* ``gpu``: what the worker reports: on the stand-in, the modelled seconds it slept; with
  ``--backend cupy`` (scripts/gpu_s9_overhead.sh) the GPU worker's warm-up, verification and
  timing, and with ``KTX_COST_DETAIL=1`` their steps (a table of their own);
* ``storage``: the Optuna storage's methods (``study.jsonl`` by default, ``--storage`` to compare);
* ``sampler``: ``Study.ask``, ``Study.tell`` and ``Trial._suggest`` (where Optuna samples) outside
  the storage;
* ``run setup and outputs``: once a run (``open_context``: the backend, the pipeline's template;
  ``finalize``: the final check's own bookkeeping and the outputs), outside the parts above;
* ``other``: everything else (the engine, the cache and log files).

The per-evaluation overhead (the goal's) is everything but the GPU, the worker's start and the
run's setup and outputs, which a longer search spreads thinner.

Worker-side parts a real GPU adds (module load, input draws, the verification's launches and
comparisons, output copies) are in scripts/gpu_s9_overhead.sh, through the worker's ``costs``.

    .venv/bin/python scripts/overhead.py [--kernel kernels/act_and_mul_scalar] [--trials 40]
        [--shape tokens=16,d=4096] [--kernel-us 3.0] [--storage URL] [--json OUT]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

# -- the stand-in worker (runs in the worker process) -----------------------------------------


def handle(op: str, payload: Any) -> Any:
    """A GPU worker that sleeps what the request's launches would take (``KTX_OVERHEAD_US``: the
    kernel's time a launch, every config alike) and reports it as its timing."""
    from ktx.measure.cost import timing_seconds
    from ktx.measure.gpu import Options
    from ktx.measure.occupancy import DeviceLimits
    from ktx.measure.types import Measurement, Status, Timing

    if op == "device":
        return DeviceLimits().to_dict()
    if op == "warmup":
        return {}
    assert op == "measure", op
    us = float(os.environ.get("KTX_OVERHEAD_US", "3.0"))
    seconds = timing_seconds(us, Options.from_dict(payload.get("options")))
    time.sleep(seconds)
    config = dict(payload["candidate"]["config"])
    m = Measurement(
        kernel=Path(payload["spec"]).parent.name, shape=payload["shape"], config=config, status=Status.OK,
        graph=Timing.of([us]), single=Timing.of([us + 2.0]), verified=tuple(sorted(payload["modules"])),
    )  # fmt: skip
    return {**m.to_dict(), "costs": {"warmup_s": 0.0, "python_s": 0.0, "verify_s": 0.0, "time_s": seconds}}


# -- the accounting (runs in this process) ----------------------------------------------------


class Ledger:
    """Exclusive seconds per part, from a stack of the parts under way (main thread only)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        #: the worker's own steps (``KTX_COST_DETAIL=1``), the Python reference and warm-ups
        self.steps: dict[str, float] = defaultdict(float)
        #: every worker request: its op, wall seconds and the worker's account
        self.requests: list[dict[str, Any]] = []
        self._stack: list[tuple[str, float]] = []
        self._main = threading.main_thread()

    @contextmanager
    def part(self, name: str) -> Iterator[None]:
        if threading.current_thread() is not self._main:
            yield
            return
        now = time.perf_counter()
        if self._stack:
            top, since = self._stack[-1]
            self.seconds[top] += now - since
        self._stack.append((name, now))
        self.calls[name] += 1
        try:
            yield
        finally:
            now = time.perf_counter()
            top, since = self._stack.pop()
            self.seconds[top] += now - since
            if self._stack:
                self._stack[-1] = (self._stack[-1][0], now)

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            with self.part(name):
                return fn(*args, **kwargs)

        return timed


STORAGE_METHODS = (
    "create_new_study", "get_study_id_from_name", "get_study_name_from_id", "get_study_directions",
    "get_study_user_attrs", "get_study_system_attrs", "set_study_user_attr", "set_study_system_attr",
    "get_all_studies", "create_new_trial", "set_trial_param", "get_trial_id_from_study_id_trial_number",
    "set_trial_state_values", "set_trial_intermediate_value", "set_trial_user_attr",
    "set_trial_system_attr", "get_trial", "get_all_trials", "get_best_trial", "get_n_trials",
    "get_trial_params", "get_trial_user_attrs", "get_trial_system_attrs", "get_trial_number_from_id",
    "get_trial_param",
)  # fmt: skip


def instrument(ledger: Ledger) -> None:
    """Wrap the parts' entry points (classes patched for the whole process: this is a script)."""
    import optuna

    from ktx.measure import protocol
    from ktx.measure.compile import CompilePool
    from ktx.search import runner

    CompilePool.result = ledger.wrap("compile", CompilePool.result)  # type: ignore[method-assign]
    # once a run, not per evaluation: opening the backend and the spec's pipeline, the outputs
    runner.open_context = ledger.wrap("run setup and outputs", runner.open_context)
    runner.finalize = ledger.wrap("run setup and outputs", runner.finalize)
    original_call = protocol.Supervisor.call

    def call(self: Any, op: str, payload: Any = None, timeout: float = 60.0) -> Any:
        with ledger.part("worker"):
            outcome = original_call(self, op, payload, timeout)
        reported = 0.0
        costs: dict[str, Any] = {}
        if outcome.ok and isinstance(outcome.result, dict):
            costs = outcome.result.get("costs") or {}
        elif outcome.ok and isinstance(outcome.result, list):  # a paired request: its timings
            for pair in outcome.result:
                for side in pair:
                    for k, v in (side.get("costs") or {}).items():
                        if isinstance(v, float | int):
                            costs[k] = costs.get(k, 0.0) + float(v)
        reported = sum(float(costs.get(k, 0.0)) for k in ("warmup_s", "verify_s", "time_s"))
        if threading.current_thread() is threading.main_thread():
            ledger.seconds["worker"] -= reported
            ledger.seconds["gpu"] += reported
            for k, v in (costs.get("parts") or {}).items():
                ledger.steps[k] += float(v)
            for k in ("python_s", "warmup_s"):
                ledger.steps[k] += float(costs.get(k, 0.0))
        ledger.requests.append({"op": op, "seconds": round(outcome.seconds, 4), "costs": costs})
        return outcome

    protocol.Supervisor.call = call  # type: ignore[method-assign]
    protocol.WorkerProcess.__init__ = ledger.wrap("worker start", protocol.WorkerProcess.__init__)  # type: ignore[method-assign]
    optuna.Study.ask = ledger.wrap("sampler", optuna.Study.ask)  # type: ignore[method-assign]
    optuna.Study.tell = ledger.wrap("sampler", optuna.Study.tell)  # type: ignore[method-assign]
    # Optuna samples a parameter when the engine suggests it, not in ``ask``
    optuna.Trial._suggest = ledger.wrap("sampler", optuna.Trial._suggest)  # type: ignore[method-assign]
    from optuna.storages import InMemoryStorage, JournalStorage, RDBStorage
    from optuna.storages._cached_storage import _CachedStorage

    for cls in (InMemoryStorage, JournalStorage, RDBStorage, _CachedStorage):
        for name in STORAGE_METHODS:
            method = getattr(cls, name, None)
            if callable(method):
                setattr(cls, name, ledger.wrap("storage", method))


def run(args: argparse.Namespace, out: Path, cache: Path) -> dict[str, Any]:
    """One ``ktx tune`` run; its parts' seconds and its evaluations."""
    from ktx.search.runlog import read_log
    from ktx.search.runner import TuneRequest
    from ktx.search.workers import run_tune

    os.environ["KTX_CACHE_DIR"] = str(cache)
    os.environ["KTX_OVERHEAD_US"] = str(args.kernel_us)
    backend = f"harness:{Path(__file__).resolve()}:handle" if args.backend == "stand-in" else args.backend
    storage = args.storage
    if storage == "sqlite":  # SQLite in the run's folder, as before the journal
        out.mkdir(parents=True, exist_ok=True)
        storage = f"sqlite:///{out.resolve() / 'study.db'}"
    ledger = Ledger()
    global LEDGER
    LEDGER = ledger
    req = TuneRequest(
        kernel_dir=Path(args.kernel).resolve(), passes=args.passes, shapes=(args.shape,), trials=args.trials,
        sampler=args.sampler, seed=1, storage=storage, backend=backend, time_limit=args.time_limit,
        out=out, holdout="none", quiet=True, jobs=1,
    )  # fmt: skip
    with ledger.part("other"):
        began = time.perf_counter()
        run_tune(req)
        wall = time.perf_counter() - began
    measures = [e for e in read_log(out / "log.jsonl") if e.get("event") == "measure"]
    parts, calls = dict(ledger.seconds), dict(ledger.calls)
    return {"wall_s": wall, "measures": len(measures), "parts": parts, "calls": calls,
            "steps": dict(ledger.steps), "requests": ledger.requests}  # fmt: skip


LEDGER: Ledger | None = None


def table(label: str, result: dict[str, Any], kernel_us: float) -> str:
    n = max(1, result["measures"])
    parts = result["parts"]
    order = ["compile", "worker start", "worker", "gpu", "storage", "sampler", "run setup and outputs"]
    order.append("other")
    once = ("gpu", "worker start", "run setup and outputs")
    host = sum(v for k, v in parts.items() if k not in once)
    total = sum(v for k, v in parts.items() if k != "gpu")
    goal = 0.2 + 30 * kernel_us * 1e-6
    lines = [
        f"### {label}: {result['measures']} evaluations, {result['wall_s']:.2f} s wall",
        "",
        "| part | s in all | s per evaluation | calls |",
        "| --- | ---: | ---: | ---: |",
    ]
    for k in order:
        seconds = parts.get(k, 0.0)
        lines.append(f"| {k} | {seconds:.3f} | {seconds / n:.4f} | {result['calls'].get(k, 0)} |")
    lines.append(f"| all but the GPU | {total:.3f} | {total / n:.4f} | |")
    label = "**per evaluation: all but the GPU and the once-a-run parts**"
    lines.append(f"| {label} | {host:.3f} | **{host / n:.4f}** | |")
    lines.append("")
    lines.append(
        f"goal: at most 0.2 s + 30 x {kernel_us:g} µs = {goal:.4f} s an evaluation: "
        f"{'met' if host / n <= goal else 'NOT met'} ({host / n:.4f} s)"
    )
    if any(v > 0 for v in (result.get("steps") or {}).values()):
        lines += ["", "the worker's steps (s in all, s per evaluation):", ""]
        lines += [f"- {k}: {v:.3f} ({v / n:.4f})" for k, v in sorted(result["steps"].items())]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernel", default=str(ROOT / "kernels" / "act_and_mul_scalar"))
    parser.add_argument("--passes", default="block-size,split{max=8}")
    parser.add_argument("--shape", default="tokens=16,d=4096")
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--sampler", default="tpe")
    parser.add_argument("--kernel-us", type=float, default=3.0, help="the modelled kernel's time a launch")
    parser.add_argument(
        "--storage",
        default=None,
        help="'sqlite' (in each run's folder, as before session 9) or an Optuna storage URL "
        "(default: the run folder's journal)",
    )
    parser.add_argument("--backend", default="stand-in", help="stand-in (this file's handle) or cupy")
    parser.add_argument("--time-limit", type=float, default=None, help="ktx tune's --time-limit")
    parser.add_argument("--skip-cold", action="store_true", help="only the run with a warm compile cache")
    parser.add_argument("--json", type=Path, default=None, help="write the numbers here too")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="ktx-overhead-") as tmp:
        cache = Path(tmp) / "cache"
        proxy = _Proxy()
        instrument(proxy)  # type: ignore[arg-type]
        labels = ("cold compile cache", "warm compile cache")
        if args.skip_cold:  # the compiles still run once first, unaccounted
            run(args, Path(tmp) / "unaccounted", cache)
        for label in labels[1:] if args.skip_cold else labels:
            out = Path(tmp) / label.replace(" ", "-")
            results[label] = run(args, out, cache)
            print(table(label, results[label], args.kernel_us))
            print()
    if args.json:
        record = {"args": {k: str(v) for k, v in vars(args).items()}, **results}
        args.json.write_text(json.dumps(record, indent=1))
    return 0


class _Proxy:
    """The ledger the class patches report to: the current run's (:data:`LEDGER`)."""

    def __getattr__(self, name: str) -> Any:
        assert LEDGER is not None
        return getattr(LEDGER, name)

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            assert LEDGER is not None
            with LEDGER.part(name):
                return fn(*args, **kwargs)

        return timed


if __name__ == "__main__":
    raise SystemExit(main())
