"""``ktx tune`` as a library call: baselines, searches, workers, outputs.

One run folder (default ``.ktx/runs/<kernel>/``) holds the study (``study.jsonl``, a journal
file, or ``study.db`` with ``--workers``, unless ``--storage`` names a server), the measurement
cache (``cache.jsonl``), the run log (``log.jsonl``) and the outputs. A run started again on the
same folder continues: finished trials stay in the study, measured candidates stay in the cache,
stale RUNNING trials of the killed process are marked FAIL, and each shape's budget counts what
is already there.

With ``workers > 1`` this process starts that many worker processes (one per GPU through
``CUDA_VISIBLE_DEVICES``) on the same studies, waits, and writes the outputs; each worker measures
its share of the originals, searches, checks its share of the shapes and measures its share of
the held-out points ahead (:mod:`ktx.search.workers`). On several machines, start
``ktx tune --storage postgresql://...`` on each: each is a worker, and each writes the same
outputs from the shared studies.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import itertools
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import optuna
from ktx.ir.errors import KtxError, Location

from ktx.measure.backend import Backend
from ktx.measure.cost import PAIRED_REQUEST_S
from ktx.measure.gpu import Options
from ktx.measure.occupancy import DeviceLimits
from ktx.measure.types import Measurement, Status, config_key
from ktx.search.cache import MeasurementCache
from ktx.search.dispatch import Choice, DispatchTable, build_table, choose_bucket_var
from ktx.search.engine import (
    Settings,
    StudyStats,
    best_measurement,
    launch_blocks,
    open_study,
    plan,
    remeasure_top,
    remeasured_best,
    search_joint,
    search_shape,
    study_stats,
    top_configs,
    warm_start_configs,
)
from ktx.search.evaluate import Evaluator, Policy, choose_metric, objective_time
from ktx.search.final import (
    WRITE_S,
    Shortlist,
    check_cost,
    check_grace,
    final_check,
    pair_estimate,
    reserve,
)
from ktx.search.narrow import study_narrowness
from ktx.search.paired import PAIRS, SKIPPED, PairedCheck
from ktx.search.progress import Display
from ktx.search.recording import FORMAT, Recording, RecordingBackend, write
from ktx.search.report import HoldoutRow, ShapeResult, Summary, write_outputs
from ktx.search.runlog import RunLog
from ktx.search.runoff import (
    Entrant,
    Pace,
    Runoff,
    entrants,
    fill_diagonal,
    reserve_s,
    run_runoff,
    with_runoffs,
)
from ktx.search.study import JOURNAL, default_url, open_storage, redact
from ktx.search.tunable import Tunable, load_tunable
from ktx.spec import ShapePoint, Spec
from ktx.specload import load_spec


@dataclass(frozen=True)
class TuneRequest:
    """Everything ``ktx tune`` is asked; the defaults are the CLI's."""

    kernel_dir: Path
    passes: str = ""
    shapes: tuple[str, ...] = ()
    trials: int = 100
    time_limit: float | None = None
    sampler: str = "auto"
    seed: int | None = None
    storage: str | None = None
    workers: int = 1
    backend: str = "cupy"
    out: Path | None = None
    metric: str = "auto"
    joint: bool = False
    holdout: str = "auto"
    jobs: int = 1
    warm_start: int = 3
    min_occupancy: float = 0.0
    max_spills: int | None = None
    min_gain: float | None = None  # None: each shape's measured noise, at least 1%
    bucket_var: str | None = None
    study: str = ""  # study name prefix (default: the kernel's name)
    quiet: bool = False
    worker_index: int | None = None  # set in processes started by ``workers > 1``
    throttle: float = 0.0  # replay only: seconds per measurement, standing in for GPU time
    #: Replay of a recorded run only: (shape, evaluations) after which that shape's search stops.
    stop_after: tuple[tuple[str, int], ...] = ()

    @property
    def is_worker(self) -> bool:
        return self.worker_index is not None

    def worker_argv(self, index: int, run_dir: Path, url: str) -> list[str]:
        """``ktx tune`` arguments for worker ``index`` of this run (same search, no outputs)."""
        argv = [str(self.kernel_dir), "--trials", str(self.trials), "--sampler", self.sampler]
        argv += ["--backend", self.backend, "--metric", self.metric, "--jobs", str(self.jobs)]
        argv += ["--warm-start", str(self.warm_start), "--min-occupancy", str(self.min_occupancy)]
        argv += ["--out", str(run_dir), "--storage", url, "--worker-index", str(index), "--quiet"]
        # the workers reserve time for, and measure ahead, the held-out points the run will check
        argv += ["--holdout", self.holdout]
        for flag, value in (
            ("--passes", self.passes),
            ("--shapes", ";".join(self.shapes)),
            ("--time-limit", self.time_limit),
            ("--seed", None if self.seed is None else self.seed + index),
            ("--max-spills", self.max_spills),
            ("--bucket", self.bucket_var),
            ("--study", self.study),
            ("--throttle", self.throttle or None),
        ):
            if value not in (None, ""):
                argv += [flag, str(value)]
        if self.joint:
            argv.append("--joint")
        return argv

    def settings(self) -> Settings:
        return Settings(
            trials=self.trials,
            sampler=self.sampler,
            seed=self.seed,
            metric=self.metric,
            jobs=self.jobs,
            warm_start=self.warm_start,
        )


# -- setup ---------------------------------------------------------------------------------


@dataclass
class Context:
    """What one process of a run holds open (mutable: backend and storage are resources)."""

    request: TuneRequest
    spec: Spec
    tunable: Tunable
    points: tuple[ShapePoint, ...]
    run_dir: Path
    url: str
    storage: optuna.storages.BaseStorage
    backend: Backend
    evaluator: Evaluator
    log: RunLog
    recording: Recording | None
    display: Display
    #: Shapes whose original the time limit left unmeasured: not searched, reported as such.
    skipped: tuple[ShapePoint, ...] = ()
    #: Seconds the original's measurement took per shape (this run): the time budget's unit.
    costs: dict[str, float] = dataclasses.field(default_factory=dict)

    @property
    def searched(self) -> tuple[ShapePoint, ...]:
        return tuple(p for p in self.points if p not in self.skipped)

    @property
    def stand_in(self) -> str:
        """``harness:MODULE:FUNCTION`` when a CPU stand-in answers for the GPU worker, else ''."""
        return self.request.backend if self.request.backend.startswith("harness:") else ""

    def close(self) -> None:
        close = getattr(self.backend, "close", None)
        if callable(close):
            close()
        self.display.close()


def open_backend(
    text: str, spec: Spec, throttle: float, bandwidth: bool = True
) -> tuple[Backend, Recording | None, DeviceLimits]:
    """``replay:FILE`` (a recording) or ``cupy`` (the GPU harness); ``bandwidth``: whether the
    harness measures the device's copy bandwidth (:class:`ktx.measure.harness.Harness`)."""
    if text.startswith("replay:"):
        recording = Recording.load(text.removeprefix("replay:"))
        if not recording.kernel and spec.name in recording.kernels:  # a bench of several kernels
            recording = recording.only(spec.name)
        if recording.kernel and recording.kernel != spec.name:
            raise KtxError(
                f"the recording is of {recording.kernel!r}, not {spec.name!r}", Location(recording.path)
            )
        where = recording.device or "an unknown device"
        limits = dataclasses.replace(DeviceLimits(), name=f"replay of {where}")
        return RecordingBackend(recording, throttle), recording, limits
    if text != "cupy" and not text.startswith("harness:"):
        raise KtxError(f"unknown backend {text!r}", hint="use cupy or replay:FILE")
    from ktx.measure.gpu import Options
    from ktx.measure.harness import Harness
    from ktx.measure.protocol import DEFAULT_HANDLER

    # harness:MODULE:FUNCTION swaps the GPU worker's handler (tests run the harness on a CPU).
    handler = DEFAULT_HANDLER if text == "cupy" else text.removeprefix("harness:")
    harness = Harness(spec, options=Options(rounds=spec.verify.rounds), handler=handler, bandwidth=bandwidth)
    try:
        limits = harness.device()
    except BaseException:
        harness.close()
        raise
    if handler != DEFAULT_HANDLER:  # a CPU stand-in answers: never call it a real device
        limits = dataclasses.replace(limits, name=f"stand-in ({text})")
    return harness, None, limits


def select_points(spec: Spec, names: Sequence[str]) -> tuple[ShapePoint, ...]:
    """Shape sets (comma-separated names) or single shapes, in the spec's order, no repeats."""
    points: list[ShapePoint] = []
    for name in names or (spec.default_shapes,):
        try:
            found = spec.shape_set(name).points
        except KtxError:
            found = (spec.find_point(name),)
        points += [p for p in found if p not in points]
    return tuple(points)


def order_points(points: Sequence[ShapePoint], bucket_var: str) -> tuple[ShapePoint, ...]:
    """Group equal other dimensions, bucket variable ascending: neighbours come one after another."""

    def key(p: ShapePoint) -> tuple[tuple[tuple[str, int], ...], int]:
        d = p.as_dict()
        return tuple((k, v) for k, v in p.values if k != bucket_var), d.get(bucket_var, 0)

    return tuple(sorted(points, key=key))


@contextlib.contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """One main process per run folder (workers it starts do not take the lock)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    handle: IO[str] = (run_dir / ".lock").open("w")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise KtxError(
            f"another ktx tune is running on {run_dir}", Location(str(run_dir)), "wait for it, or give --out"
        ) from None
    try:
        handle.write(str(os.getpid()))
        handle.flush()
        yield
    finally:
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()


def run_folder(req: TuneRequest, spec: Spec) -> Path:
    return (req.out or Path(".ktx") / "runs" / spec.name).resolve()


def open_context(req: TuneRequest, bandwidth: bool = True) -> Context:
    spec = load_spec(req.kernel_dir)
    backend, recording, limits = open_backend(req.backend, spec, req.throttle, bandwidth)
    if recording is not None and not req.passes:
        if not recording.space.knobs:
            raise KtxError(
                "the recording carries no knob space", Location(recording.path), "give --passes PIPELINE"
            )
        tunable = Tunable.recorded(spec.name, recording.space, recording.digest, recording.launches())
    else:
        tunable = load_tunable(spec, req.passes)
        recorded = None if recording is None else recording.pipeline
        if recording is not None and recorded is not None and recorded != tunable.pipeline:
            raise KtxError(
                f"the recording is of pipeline {recording.pipeline or '(none)'!r}, "
                f"not --passes {tunable.pipeline or '(none)'!r}",
                Location(recording.path),
                f"give --passes {recording.pipeline!r}, or no --passes to search the recording's own space",
            )
    points = select_points(spec, req.shapes)
    run_dir = run_folder(req, spec)
    run_dir.mkdir(parents=True, exist_ok=True)
    url = req.storage or default_url(run_dir, shared=req.workers > 1 or req.is_worker)
    shared = req.workers > 1 or req.storage is not None or req.is_worker
    check_storage(req)
    storage = open_storage(url, heartbeat=shared and not url.startswith(JOURNAL))
    worker = "main" if req.worker_index is None else f"worker{req.worker_index}"
    log = RunLog(run_dir / "log.jsonl", worker=f"{worker}:{os.getpid()}")
    cache = MeasurementCache(run_dir / "cache.jsonl")
    policy = Policy(req.min_occupancy, req.max_spills)
    evaluator = Evaluator(spec, tunable, backend, cache, log, limits, policy)
    display = Display(enabled=not req.quiet)
    return Context(
        req, spec, tunable, points, run_dir, url, storage, backend, evaluator, log, recording, display
    )


def check_storage(req: TuneRequest) -> None:
    """A journal file (:mod:`ktx.search.journal`) has one writer: not for ``--workers N``."""
    if req.storage is not None and req.storage.startswith(JOURNAL) and (req.workers > 1 or req.is_worker):
        raise KtxError(
            f"--storage {req.storage}: a journal file has one writer, "
            f"and --workers {req.workers} starts several",
            hint="give --storage sqlite:///PATH or an RDB server URL, or leave --storage out",
        )


def backend_tag(ctx: Context) -> str:
    """A short hash of the backend's fingerprint (kind, device, toolkit, harness options; the
    recording's digest for replay; the handler for ``harness:``)."""
    return hashlib.sha256(ctx.evaluator.fingerprint.encode()).hexdigest()[:8]


def study_name(ctx: Context, point: ShapePoint | None) -> str:
    """``prefix|space tag|backend tag|shape``: a changed pipeline or space, another backend or
    device, starts new studies (their originals and trials are not this backend's)."""
    where = "joint" if point is None else point.name
    return f"{ctx.request.study or ctx.spec.name}|{ctx.tunable.study_tag}|{backend_tag(ctx)}|{where}"


def seed_name(ctx: Context, point: ShapePoint | None) -> str:
    """What the sampler's seed derives from: the study name without the backend tag, so that a
    replay of a run's recording samples the same configs as the run."""
    where = "joint" if point is None else point.name
    return f"{ctx.request.study or ctx.spec.name}|{ctx.tunable.study_tag}|{where}"


# -- phases --------------------------------------------------------------------------------


def prepare_shape(ctx: Context, point: ShapePoint) -> tuple[Measurement, str]:
    """The original's measurement and the objective metric for ``point``, fixed in the study
    by whoever gets there first so that every worker optimises the same quantity."""
    settings = ctx.request.settings()
    study = open_study(ctx.storage, study_name(ctx, point), optuna.samplers.RandomSampler())
    attrs = study.user_attrs
    backend = ctx.evaluator.fingerprint
    if attrs.get("backend", backend) != backend:
        raise KtxError(
            f"study {study.study_name!r} was measured on another backend: {attrs['backend']!r}, "
            f"not {backend!r}",
            Location(redact(ctx.url)),
            "give another --out, --storage or --study",
        )
    if "original" in attrs and "metric" in attrs:
        return Measurement.from_dict(attrs["original"]), str(attrs["metric"])
    clock = time.monotonic()
    original = ctx.evaluator.original(point)
    ctx.costs[point.name] = time.monotonic() - clock
    if not original.ok:
        ctx.display.message(
            f"{point.name}: the original kernel failed ({original.status}): {original.message[:200]}"
        )
    metric = choose_metric(settings.metric, original)
    study.set_user_attr("backend", backend)
    study.set_user_attr("original", original.to_dict())
    study.set_user_attr("metric", metric)
    return original, metric


def tune_shapes(ctx: Context, deadline: float | None) -> None:
    """Search each shape in turn, warm-starting from the shapes tuned before it."""
    req = ctx.request
    settings = req.settings()
    bucket = choose_bucket_var(ctx.spec.variables, req.bucket_var)
    ordered = order_points(ctx.searched, bucket)
    tuned: dict[str, list[dict[str, int]]] = {}
    blocks: dict[str, float] = {}  # the original's block count per shape: what sets its parallelism
    concurrent = req.workers > 1 or req.is_worker or req.storage is not None
    for i, point in enumerate(ordered):
        if deadline is not None and time.monotonic() >= deadline:
            # Past the search's deadline no shape gets an evaluation: opening, planning and
            # (in a worker) measuring a missing original for each of the rest only delays the
            # final checks (21 shapes cost seconds of Python each on a loaded host).
            ctx.log.write("search_cut", shapes=[p.name for p in ordered[i:]])
            break
        original, metric = prepare_shape(ctx, point)
        name = study_name(ctx, point)
        left = len(ordered) - i
        share = None if deadline is None else time.monotonic() + max(0.0, deadline - time.monotonic()) / left
        if (count := launch_blocks(original)) is not None:
            blocks[point.name] = count
        neighbours = warm_start_configs(tuned, point, bucket, settings.warm_start, blocks=blocks)
        shape_plan = plan(ctx.tunable.space, ctx.evaluator, (point,), settings)
        ctx.display.start(point.name, shape_plan.budget)
        base = objective_time(original, metric)

        def show(stats: Any, base: float | None = base) -> None:
            ctx.display.update(stats, base)

        if ctx.tunable.space.knobs:
            study = search_shape(
                ctx.evaluator,
                ctx.storage,
                name,
                point,
                metric,
                settings,
                neighbours,
                share,
                show,
                concurrent,
                shape_plan,
                seed_name(ctx, point),
                dict(req.stop_after).get(point.name),
                worker_share(req),
            )
            tuned[point.name] = top_configs(study, settings.warm_start)
            stats = study_stats(study)
            narrow = study_narrowness(study, ctx.tunable.space, point.name)
            again = None
            if narrow is not None and narrow.needle and not concurrent:
                # a narrow optimum: re-measure the few best rather than search longer (issue 23)
                again = remeasure_top(ctx.evaluator, study, point, metric, deadline=share)
            ctx.log.write(
                "shape_done",
                shape=point.name,
                trials=stats.trials,
                evaluations=stats.evaluations,
                best_us=stats.best_value,
                failures=dict(stats.failures),
                narrow=None if narrow is None else narrow.to_dict(),
                warm_start_dropped=study.user_attrs.get("warm_start_dropped"),
                remeasured=None
                if again is None
                else {"configs": again["configs"], "chosen": again["chosen"]},
            )
        ctx.display.finish()


def tune_joint(ctx: Context, deadline: float | None) -> None:
    settings = ctx.request.settings()
    metrics: dict[str, str] = {}
    originals: dict[str, float] = {}
    for point in ctx.searched:
        original, metric = prepare_shape(ctx, point)
        t = objective_time(original, metric)
        if t is None:
            raise KtxError(
                f"joint search needs the original to run at every shape; it failed at {point.name}"
            )
        metrics[point.name], originals[point.name] = metric, t
    budget = plan(ctx.tunable.space, ctx.evaluator, ctx.searched, settings).budget
    ctx.display.start("all shapes (joint)", budget)
    if ctx.tunable.space.knobs:
        search_joint(
            ctx.evaluator, ctx.storage, study_name(ctx, None), ctx.searched, metrics, originals, settings,
            deadline, lambda s: ctx.display.update(s, 1.0), ctx.request.workers > 1 or ctx.request.is_worker,
            seed_name(ctx, None),
        )  # fmt: skip
    ctx.display.finish()


#: The run's deadline as wall-clock (epoch) seconds, passed to its workers: a worker's own start-up
#: (Python, CUDA, the warm-up) then counts against the run's limit instead of extending it.
DEADLINE_ENV = "KTX_RUN_DEADLINE"

#: How many workers the run started (a worker measures the originals of its share of the shapes).
WORKERS_ENV = "KTX_RUN_WORKERS"

#: The folder where the run's workers mark the end of their search (:mod:`ktx.search.workers`).
BARRIER_ENV = "KTX_RUN_BARRIER"


def run_deadline(own: float | None) -> float | None:
    """A worker's deadline (``time.monotonic()`` seconds): the run's, from :data:`DEADLINE_ENV`,
    where the main process set it; else its own."""
    epoch = os.environ.get(DEADLINE_ENV)
    if not epoch:
        return own
    return time.monotonic() + float(epoch) - time.time()


def worker_share(req: TuneRequest) -> tuple[int, int]:
    """(index, count) of this process among the run's workers; (0, 1) outside a worker."""
    if not req.is_worker:
        return 0, 1
    count = max(1, int(os.environ.get(WORKERS_ENV) or 1))
    return (req.worker_index or 0) % count, count


def share_of(points: Sequence[ShapePoint], index: int, count: int) -> tuple[ShapePoint, ...]:
    """The shapes whose originals worker ``index`` of ``count`` measures first: every
    ``count``-th, from its own offset, so the originals are measured side by side."""
    return tuple(points[index % max(1, count) :: max(1, count)])


def prepare_share(ctx: Context, deadline: float | None) -> None:
    """A worker measures the originals of its share of the shapes (another worker's that are
    still missing are measured where the search reaches them: whoever gets there first)."""
    count = int(os.environ.get(WORKERS_ENV) or 1)
    for point in share_of(ctx.points, ctx.request.worker_index or 0, count):
        if deadline is not None and skipped_after(ctx, deadline):
            return
        prepare_shape(ctx, point)


def unmeasured_after_workers(ctx: Context) -> None:
    """Shapes whose original no worker measured before the limit are reported unmeasured."""
    missing = []
    for point in ctx.points:
        attrs = open_study(ctx.storage, study_name(ctx, point), optuna.samplers.RandomSampler()).user_attrs
        if "original" not in attrs or "metric" not in attrs:
            missing.append(point)
    if missing:
        ctx.skipped = tuple(missing)
        ctx.log.write("baselines_cut", skipped=[p.name for p in missing])


def spawn_workers(
    req: TuneRequest, run_dir: Path, url: str, deadline: float | None = None
) -> tuple[list[subprocess.Popen[bytes]], Path]:
    """Start ``workers`` copies of this command on the same studies (not waited for), and the
    folder where they mark the end of their search. ``deadline``: the run's, which the workers
    search up to, less the final phases' reserve."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    devices = (
        [d for d in visible.split(",") if d.strip()] if visible else [str(i) for i in range(req.workers)]
    )
    procs: list[subprocess.Popen[bytes]] = []
    # where the workers mark the end of their search (ktx.search.workers): one folder per run
    barrier = run_dir / ".searched" / f"{os.getpid()}-{time.time_ns()}"
    for i in range(req.workers):
        env = dict(os.environ)
        env[WORKERS_ENV] = str(req.workers)
        env[BARRIER_ENV] = str(barrier)
        if deadline is not None:
            env[DEADLINE_ENV] = repr(time.time() + deadline - time.monotonic())
        if req.backend == "cupy":
            env["CUDA_VISIBLE_DEVICES"] = devices[i % len(devices)]
        cmd = [sys.executable, "-m", "ktx", "tune", *req.worker_argv(i, run_dir, url)]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL))
    return procs, barrier


def wait_workers(ctx: Context, procs: Sequence[subprocess.Popen[bytes]], barrier: Path) -> None:
    """Show the workers' progress until they all exit; a worker that failed fails the run."""
    watch_workers(ctx, procs)
    failed = [(i, p.wait()) for i, p in enumerate(procs)]
    shutil.rmtree(barrier, ignore_errors=True)
    bad = [(i, code) for i, code in failed if code != 0]
    if bad:
        raise KtxError(
            f"worker(s) failed: {', '.join(f'#{i} exit {c}' for i, c in bad)}", Location(str(ctx.run_dir))
        )


def watch_workers(ctx: Context, procs: Sequence[subprocess.Popen[bytes]], every_s: float = 2.0) -> None:
    """Show the workers' progress, read from the shared studies, until they all exit. Quiet,
    it only waits: reading every study every few seconds (and enumerating every shape's space
    for the budget) took CPU from the workers on a small host and showed nobody anything."""
    if not ctx.display.enabled:
        while any(p.poll() is None for p in procs):
            time.sleep(min(every_s, 0.2))
        return
    settings = ctx.request.settings()
    budget = sum(plan(ctx.tunable.space, ctx.evaluator, (p,), settings).budget for p in ctx.points)
    ctx.display.start(f"{len(procs)} workers, {len(ctx.points)} shapes", budget)
    while any(p.poll() is None for p in procs):
        time.sleep(every_s)
        stats = []
        for point in ctx.points:
            with contextlib.suppress(KeyError):
                stats.append(
                    study_stats(optuna.load_study(study_name=study_name(ctx, point), storage=ctx.storage))
                )
        if stats:
            failures: dict[str, int] = {}
            for s in stats:
                for k, v in s.failures.items():
                    failures[k] = failures.get(k, 0) + v
            total = StudyStats(
                sum(s.trials for s in stats), sum(s.evaluations for s in stats), failures,
                sum(s.refused for s in stats), None, None, 0,
            )  # fmt: skip
            ctx.display.update(total, None)
    ctx.display.finish()


def collect(ctx: Context, points: Sequence[ShapePoint] | None = None) -> tuple[ShapeResult, ...]:
    """Results per shape (``points``, default every shape of the run), from the studies alone."""
    results: list[ShapeResult] = []
    joint = None
    if ctx.request.joint and ctx.tunable.space.knobs:
        joint = optuna.load_study(study_name=study_name(ctx, None), storage=ctx.storage)
        best_joint = None
        try:
            best_joint = dict(joint.best_trial.user_attrs["ktx"]["config"])
        except (ValueError, KeyError):
            best_joint = None
    for point in ctx.points if points is None else points:
        if point in ctx.skipped:
            results.append(unmeasured(ctx, point))
            continue
        study = optuna.load_study(study_name=study_name(ctx, point), storage=ctx.storage)
        original = Measurement.from_dict(study.user_attrs["original"])
        metric = str(study.user_attrs["metric"])
        if joint is not None:
            stats = study_stats(joint)
            config = best_joint
            best = None if config is None else ctx.evaluator.evaluate(config, point).measurement
            sampler = str(joint.user_attrs.get("sampler", ctx.request.sampler))
        else:
            stats = study_stats(study)
            found = (
                (runoff_best(study) or remeasured_best(study) or best_measurement(study))
                if ctx.tunable.space.knobs
                else None
            )
            config, best = (None, None) if found is None else found
            sampler = str(study.user_attrs.get("sampler", "-"))
        results.append(ShapeResult(point, metric, sampler, original, config, best, stats, study.study_name))
    return tuple(results)


def remeasure_sentence(record: object) -> str:
    """What re-measuring the few best configs of a narrow optimum found ('' where it did not run).

    >>> remeasure_sentence({"configs": [{"config": {"B": 1}, "first_us": 1.7, "again_us": 2.0},
    ...     {"config": {"B": 2}, "first_us": 1.8, "again_us": 1.8}], "chosen": {"B": 2}})
    ' Re-measured, the 2 best took 1.700 -> 2.000, 1.800 -> 1.800 µs; chosen: B=2.'
    """
    if not isinstance(record, dict) or not record.get("configs"):
        return ""
    pairs = ", ".join(f"{r['first_us']:.3f} -> {r['again_us']:.3f}" for r in record["configs"])
    chosen = ", ".join(f"{k}={v}" for k, v in dict(record.get("chosen") or {}).items()) or "-"
    return f" Re-measured, the {len(record['configs'])} best took {pairs} µs; chosen: {chosen}."


def needle_notes(ctx: Context, results: Sequence[ShapeResult]) -> list[str]:
    """A note for each shape whose best measured config stands alone (:mod:`ktx.search.narrow`)."""
    if not ctx.tunable.space.knobs or ctx.request.joint:
        return []
    notes: list[str] = []
    for r in results:
        if not r.study or r.skipped:
            continue
        study = optuna.load_study(study_name=r.study, storage=ctx.storage)
        found = study_narrowness(study, ctx.tunable.space, r.point.name)
        if found is not None and found.needle:
            notes.append(
                f"{found.sentence()}: the speedup there rests on one config, which the final check "
                "re-measures; more evaluations are unlikely to find a neighbour as good."
                + remeasure_sentence(study.user_attrs.get("remeasured"))
            )
    return notes


def unmeasured(ctx: Context, point: ShapePoint) -> ShapeResult:
    """A shape the time limit left without even its original's measurement."""
    why = "not measured: the time limit ran out before this shape's original was measured"
    original = Measurement.failure(ctx.spec, ctx.tunable.candidate({}), point.name, Status.TIMEOUT, why)
    stats = StudyStats(0, 0, {}, 0, None, None, 0)
    return ShapeResult(point, "graph", "-", original, None, None, stats, "", skipped=True)


def holdout_points(ctx: Context, tuned: Sequence[ShapePoint], bucket: str) -> tuple[ShapePoint, ...]:
    """``auto``: the geometric midpoints of the bucket variable between tuned shapes (where the
    table is least sure), each group of other dimensions alike; or named shape sets; or none."""
    mode = ctx.request.holdout
    if mode == "none":
        return ()
    tuned_set = set(tuned)
    if mode != "auto":
        return tuple(p for p in select_points(ctx.spec, mode.split(",")) if p not in tuned_set)
    groups: dict[tuple[tuple[str, int], ...], list[int]] = {}
    for p in tuned:
        fixed = tuple((k, v) for k, v in p.values if k != bucket)
        groups.setdefault(fixed, []).append(p.as_dict().get(bucket, 0))
    out: list[ShapePoint] = []
    for fixed, values in groups.items():
        values.sort()
        for a, b in itertools.pairwise(values):
            mid = max(a + 1, round((a * b) ** 0.5))
            if mid >= b:
                continue
            order = [k for k, _ in tuned[0].values]
            assign = {**dict(fixed), bucket: mid}
            point = ShapePoint(tuple((k, assign[k]) for k in order))
            if point not in tuned_set and ctx.spec.satisfies(point):
                out.append(point)
    return tuple(out)


def check_holdout(
    ctx: Context, table: DispatchTable, points: Sequence[ShapePoint], deadline: float | None = None
) -> tuple[HoldoutRow, ...]:
    """The table's choice against the original at shapes not tuned; points that no longer fit
    before ``deadline`` (two measurements each, plus writing) are left out and logged."""
    rows: list[HoldoutRow] = []
    typical = max(ctx.costs.values(), default=1.0)
    for point in points:
        chosen = table.select(point.as_dict())
        # what the workers measured ahead (:func:`ktx.search.workers.measure_holdout_ahead`)
        # costs nothing here: only a point still needing the GPU is held to the clock
        gpu = ctx.evaluator.needs_gpu(None, point) or (
            chosen is not None and ctx.evaluator.needs_gpu(chosen, point)
        )
        if gpu and deadline is not None and deadline - time.monotonic() < 2 * typical + WRITE_S:
            ctx.log.write("holdout_skipped", shape=point.name, reason="the time limit")
            continue
        original = ctx.evaluator.original(point)
        metric = choose_metric(ctx.request.metric, original)
        measured = None if chosen is None else ctx.evaluator.evaluate(chosen, point).measurement
        rows.append(HoldoutRow(point, metric, original, chosen, measured))
        ctx.log.write("holdout", shape=point.name, chosen=chosen, ratio=rows[-1].ratio)
    return tuple(rows)


def study_runoff(study: optuna.Study) -> Runoff | None:
    """The runoff recorded in ``study`` (:func:`runoffs`), where it was run for the config the
    study still holds best (a study that went on searching has another best: it is stale)."""
    data = study.user_attrs.get("runoff")
    if not isinstance(data, dict):
        return None
    try:
        record = Runoff.from_dict(data)
    except (KeyError, TypeError, ValueError):
        return None
    found = best_measurement(study)
    if found is None or config_key(found[0]) != config_key(record.incumbent):
        return None
    return record


def runoff_best(study: optuna.Study) -> tuple[dict[str, int], Measurement] | None:
    """The config a runoff chose over the search's best, with the search's measurement of it
    (None: no runoff, or it kept the search's best)."""
    record = study_runoff(study)
    if record is None or not record.changed:
        return None
    want = config_key(record.winner)
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        data = t.user_attrs.get("measurement")
        info = t.user_attrs.get("ktx")
        if isinstance(data, dict) and isinstance(info, dict) and config_key(info.get("config", {})) == want:
            return dict(record.winner), Measurement.from_dict(data)
    extra = record.measured.get(want)  # a diagonal neighbour the runoff measured itself
    return None if extra is None else (dict(record.winner), Measurement.from_dict(extra))


def study_field(study: optuna.Study, ctx: Context, metric: str) -> list[Entrant]:
    """Every config the study measured successfully, with its objective and per-launch times."""
    out: list[Entrant] = []
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        data = t.user_attrs.get("measurement")
        info = t.user_attrs.get("ktx")
        if not isinstance(data, dict) or not isinstance(info, dict):
            continue
        m = Measurement.from_dict(data)
        value = objective_time(m, metric) if m.ok else None
        if value is None or value <= 0:
            continue
        config = ctx.tunable.space.normalize(dict(info.get("config", {})))
        out.append(Entrant(config, float(value), launch_us(m)))
    return out


def runoffs(ctx: Context, results: Sequence[ShapeResult], deadline: float | None) -> dict[str, Runoff]:
    """Each searched shape's few best configs timed paired against its best
    (:mod:`ktx.search.runoff`), recorded in the shape's study (:func:`collect` then dispatches
    the winner) and logged. A shape whose study already holds a runoff for its best is not run
    again (a re-finalize). Each runoff runs only where the final checks' estimate still fits
    after it."""
    found = getattr(ctx.backend, "options", None)
    options = found if isinstance(found, Options) else Options()
    costs = measured_costs(ctx)
    todo = [r for r in results if r.study and not r.skipped and r.best_config is not None]
    found_each = getattr(ctx.backend, "candidate_cost", None)
    per_candidate: Mapping[str, Any] = found_each if isinstance(found_each, Mapping) else {}

    def check_s(r: ShapeResult) -> float:
        item = Shortlist(r.point, r.metric, r.best_config, r.speedup, launch_us(r.original),
                         None if r.best is None else launch_us(r.best), r.original.bytes)  # fmt: skip
        pair = pair_estimate(item, ctx.backend, options)
        if pair is None:
            return check_cost(costs.get(r.point.name) or 1.0)
        return PAIRED_REQUEST_S + PAIRS * pair

    counted = sum(check_s(r) for r in todo) + WRITE_S
    pace = Pace()
    out: dict[str, Runoff] = {}
    for r in todo:
        # every final check is a request at least as long as the longest the runoffs made
        after = max(counted, len(todo) * pace.request_s + WRITE_S)
        study = optuna.load_study(study_name=r.study, storage=ctx.storage)
        record = study_runoff(study)
        if record is None:
            # a candidate's measurement as the backend accounts it, else the original's (an upper bound)
            each = float(per_candidate.get(r.point.name) or costs.get(r.point.name) or 1.0)
            ranked, extra = fill_diagonal(ctx.evaluator, r.point, r.metric, study_field(study, ctx, r.metric),
                                          deadline, each, after, pace)  # fmt: skip
            field_ = entrants(ranked, lead=r.best_config)
            after = max(counted, len(todo) * pace.request_s + WRITE_S)
            record = run_runoff(ctx.evaluator, r.point, r.metric, field_, deadline, r.original.bytes, after,
                                pace=pace)  # fmt: skip
            if record is not None and extra:
                record = dataclasses.replace(record, measured=extra)
            if record is not None:
                study.set_user_attr("runoff", record.to_dict())
                ctx.log.write("runoff", **record.to_dict())
                if record.changed:
                    ctx.display.message(f"{r.point.name}: runoff: {record.sentence()}")
        if record is not None:
            out[r.point.name] = record
    return out


def paired_checks(
    ctx: Context,
    results: Sequence[ShapeResult],
    deadline: float | None,
    keep: Mapping[str, PairedCheck] | None = None,
    runoff: Mapping[str, Runoff] | None = None,
) -> dict[str, PairedCheck]:
    """The paired final check of every searched shape (:mod:`ktx.search.final`), logged.
    ``runoff``: the shapes' runoffs; a shape whose runoff changed the config is ordered by the
    gain the search's best had times the winner's paired ratio over it (its own single
    measurement in the search was slower: that is why the runoff ran).

    ``keep``: checks an earlier finalize of the same run made; a shape whose kept check ran
    (anything but skipped) for the config the studies still hold best is not measured again, so
    a re-check after more time was found (``ktx optimize``'s) re-measures only what was cut."""
    costs = measured_costs(ctx)
    kept: dict[str, PairedCheck] = {}
    for r in results:
        old = None if keep is None else keep.get(r.point.name)
        want = None if r.best_config is None else dict(r.best_config)
        same = old is not None and (None if old.config is None else dict(old.config)) == want
        if old is not None and old.status != SKIPPED and same:
            kept[r.point.name] = old

    def gain(r: ShapeResult) -> float | None:
        record = (runoff or {}).get(r.point.name)
        o = r.original_us
        if record is None or not record.changed or o is None or r.speedup is None:
            return r.speedup
        return max(r.speedup, o / record.incumbent_us * record.gain_over_incumbent)

    shortlist = [
        Shortlist(
            r.point,
            r.metric,
            r.best_config,
            gain(r),
            launch_us(r.original),
            None if r.best is None else launch_us(r.best),
            r.original.bytes,
        )
        for r in results
        if r.point not in ctx.skipped and r.point.name not in kept
    ]

    def log(check: PairedCheck) -> None:
        iv = check.interval
        ctx.log.write("paired", shape=check.shape, status=check.status, config=check.config,
                      interval=None if iv is None else iv.to_dict(), reason=check.reason[:300])  # fmt: skip
        ctx.display.message(f"{check.shape}: final check {check.text()}")

    spent: dict[str, dict[str, float]] = {}
    grace = check_grace(ctx.request.time_limit)
    checked = final_check(
        ctx.evaluator, shortlist, deadline, costs, PAIRS, log, spent=spent, grace_s=grace,
        min_gain=ctx.request.min_gain,
    )  # fmt: skip
    for name, cost in spent.items():  # how honest the estimate was (issue 23)
        ctx.log.write("paired_cost", shape=name, **cost)
    return {r.point.name: kept.get(r.point.name) or checked[r.point.name] for r in results
            if r.point.name in kept or r.point.name in checked}  # fmt: skip


def finalize(
    ctx: Context,
    wall_s: float,
    deadline: float | None = None,
    started: float | None = None,
    keep: Mapping[str, PairedCheck] | None = None,
) -> Summary:
    """Final check, dispatch table, held-out check, outputs. ``deadline`` bounds the checks;
    ``started`` (``time.monotonic()`` at the command's start) makes ``wall_s`` the whole run;
    ``keep`` holds an earlier finalize's checks (:func:`paired_checks`)."""
    results = collect(ctx)
    ran: dict[str, Runoff] = {}
    if ctx.tunable.space.knobs and not ctx.request.joint:
        ran = runoffs(ctx, results, deadline)
        if any(r.changed for r in ran.values()):
            results = collect(ctx)  # the runoffs' winners
    bucket = choose_bucket_var(ctx.spec.variables, ctx.request.bucket_var)
    checks = paired_checks(ctx, results, deadline, keep, ran) if ctx.tunable.space.knobs else {}
    min_gain = ctx.request.min_gain
    choices = [
        Choice(
            r.point,
            r.best_config,
            r.original_us,
            r.best_us,
            r.noise,
            None if r.point.name not in checks else checks[r.point.name].verdict(min_gain),
        )
        for r in results
    ]
    table = build_table(
        ctx.spec.name, ctx.spec.variables, bucket, choices, ctx.request.min_gain,
        ctx.tunable.space.names, ctx.tunable.space.default(),
        ctx.tunable.space.constraints, ctx.spec.derived,
    )  # fmt: skip
    raw = table
    holdout = (
        check_holdout(ctx, table, holdout_points(ctx, ctx.searched, bucket), deadline)
        if ctx.tunable.space.knobs
        else ()
    )
    for row in holdout:
        if row.ratio is not None and row.ratio < 1.0 and row.chosen_config is not None:
            table = table.with_exact_original(row.point, f"held-out check: {row.ratio:.3f}x")
        elif row.ratio is None and row.chosen_config is not None:
            table = table.with_exact_original(row.point, "held-out check: the chosen config failed")
    notes: list[str] = []
    if ctx.recording is not None:
        notes.append(f"Backend: replay of a recording, {ctx.recording.label}.")
        if ctx.recording.stand_in:
            notes.append(
                f"STAND-IN numbers from {ctx.recording.stand_in}, a CPU stand-in for the GPU worker: "
                "nothing here was measured on a GPU."
            )
        elif ctx.recording.synthetic:
            notes.append("SYNTHETIC numbers from an analytic cost model: nothing here was measured on a GPU.")
    if ctx.stand_in:
        notes.append(
            f"STAND-IN backend {ctx.stand_in}: a CPU stand-in answered for the GPU worker; "
            "nothing here was measured on a GPU."
        )
    if not ctx.tunable.space.knobs:
        notes.append("No knobs (no --passes): only the original kernel was measured.")
    if ctx.skipped:
        names = ", ".join(p.name for p in ctx.skipped)
        notes.append(f"The time limit ran out before these shapes' originals were measured: {names}.")
    for c in checks.values():
        if c.status == "failed":
            notes.append(
                f"The final check failed at {c.shape} ({c.reason[:200]}): the table keeps the original there."
            )
    notes += needle_notes(ctx, results)
    notes += [f"Runoff: {r.sentence()}." for r in ran.values()]
    cut = [c.shape for c in checks.values() if c.status == "skipped"]
    if cut:
        notes.append(
            f"No time was left for the final check at {', '.join(cut)}: the table keeps the original."
        )
    limits = ctx.evaluator.limits
    if ctx.recording is not None:
        device = ctx.recording.device or "unknown device (replay)"
    elif ctx.stand_in:
        device = limits.name
    else:
        device = f"{limits.name} (sm_{limits.cc}, driver {limits.driver}, runtime {limits.runtime})"
    used = frozenset(
        r.point.name
        for r in results
        if r.best_config is not None and table.select(r.point.as_dict()) == dict(r.best_config)
    )
    if started is not None:
        wall_s = time.monotonic() - started
    summary = Summary(ctx.spec.name, results, holdout, wall_s, tuple(notes), device, used, checks, ran)
    write_outputs(ctx.run_dir, summary, table, ctx.tunable, raw)
    if ctx.recording is None and ctx.tunable.space.knobs:
        write(run_recording(ctx), ctx.run_dir / "recording.json")
    ctx.log.write("outputs", folder=str(ctx.run_dir), device=device)
    ctx.log.write(
        "finished",
        geomean_speedup=summary.geomean_speedup,
        dispatched_geomean_speedup=summary.dispatched_geomean_speedup,
        wall_s=round(wall_s, 3),
    )
    return summary


def run_recording(ctx: Context) -> dict[str, Any]:
    """Every measurement the run's shape studies hold, with the knob space: a recording that
    replays this run's search on a CPU (``--backend replay:recording.json``)."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for point in ctx.searched:
        study = optuna.load_study(study_name=study_name(ctx, point), storage=ctx.storage)
        original = study.user_attrs.get("original")
        if isinstance(original, dict):
            found[(point.name, "{}")] = original
        for t in study.get_trials(deepcopy=False):
            m = t.user_attrs.get("measurement")
            if isinstance(m, dict):
                found[(str(m["shape"]), config_key(m["config"]))] = m
    limits = ctx.evaluator.limits
    options = getattr(ctx.backend, "options", None)
    method = f"ktx tune ({ctx.tunable.pipeline}); harness options: {options}"
    return {
        "format": FORMAT,
        "kernel": ctx.spec.name,
        "synthetic": bool(ctx.stand_in),  # a stand-in's numbers are not measurements either
        **({"stand_in": ctx.stand_in} if ctx.stand_in else {}),
        "method": method,
        "device": limits.name,
        "toolkit": f"driver {limits.driver}, runtime {limits.runtime}",
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "pipeline": ctx.tunable.pipeline,
        "space": {
            "knobs": ctx.tunable.space.describe(),
            "constraints": [c.text for c in ctx.tunable.space.constraints],
        },
        "measurements": list(found.values()),
    }


def bound_timeouts(backend: Backend, time_limit: float) -> None:
    """Under a time limit, no single measurement may take more than a quarter of it (at least
    10 s): the harness's ceiling holds until the original is measured at a shape, and one hang
    at that ceiling would otherwise overrun a short limit by minutes."""
    ceiling = getattr(backend, "timeout_s", None)
    if isinstance(ceiling, int | float):
        setattr(backend, "timeout_s", min(float(ceiling), max(10.0, 0.25 * time_limit)))  # noqa: B010


def prepare_all(ctx: Context, deadline: float | None) -> None:
    """Measure every shape's original (timing each: :attr:`Context.costs`). Shapes whose turn
    comes after the time limit's last moment for it are skipped and reported unmeasured."""
    skipped: list[ShapePoint] = []
    for point in ctx.points:
        if deadline is not None and skipped_after(ctx, deadline):
            skipped.append(point)
            continue
        prepare_shape(ctx, point)
    if skipped:
        ctx.skipped = tuple(skipped)
        ctx.log.write("baselines_cut", skipped=[p.name for p in skipped])
        ctx.display.message(f"time limit: {len(skipped)} shape(s) left unmeasured")


def skipped_after(ctx: Context, deadline: float) -> bool:
    """Whether no further original fits: the final phases of what was measured need their time."""
    done = measured_costs(ctx)
    need = reserve(done, 0, ctx.request.time_limit or 0.0) if done else WRITE_S
    return time.monotonic() + need + max(done.values(), default=0.0) > deadline


def measured_costs(ctx: Context) -> dict[str, float]:
    """Seconds one measurement of the original took per shape: the harness's own account where
    it has one (the worker's request without one-off costs: the process warm-up, the Python
    reference check, compiling), else the wall time of :func:`prepare_shape`."""
    harness = getattr(ctx.backend, "original_cost", None)
    return {**ctx.costs, **(harness if isinstance(harness, dict) else {})}


def launch_us(m: Measurement) -> float | None:
    """A measurement's time per launch for cost estimates: the single-launch median (it holds
    the launch's host time), else the graph one."""
    value = m.single_us if m.single_us else m.graph_us
    return value if m.ok and value and value > 0 else None


def original_pair_s(ctx: Context) -> dict[str, float]:
    """Seconds of one check pair per searched shape, counted before the search from the
    original's per-launch time on both sides (the config found is at most as slow: an upper
    bound; :mod:`ktx.measure.cost`)."""
    found = getattr(ctx.backend, "options", None)
    options = found if isinstance(found, Options) else Options()
    out: dict[str, float] = {}
    for point in ctx.searched:
        attrs = open_study(ctx.storage, study_name(ctx, point), optuna.samplers.RandomSampler()).user_attrs
        if "original" not in attrs:  # not measured (cut by the limit): nothing to count from
            continue
        original = Measurement.from_dict(attrs["original"])
        item = Shortlist(point, "graph", None, None, launch_us(original), launch_us(original), original.bytes)
        pair = pair_estimate(item, ctx.backend, options)
        if pair is not None:
            out[point.name] = pair
    return out


def search_until(ctx: Context, deadline: float | None, count: int = 1) -> float | None:
    """The search's own deadline: the run's, less what the phases after it need (the final
    check of every shape, the held-out check, writing; :func:`ktx.search.final.reserve`).

    One of ``count`` workers reserves for a share only: each checks every ``count``-th shape
    and measures ahead every ``count``-th held-out point (the original and the configs of the
    two tuned neighbours, three measurements where the main process would make two)."""
    if deadline is None:
        return None
    held: tuple[ShapePoint, ...] = ()
    if ctx.tunable.space.knobs:
        bucket = choose_bucket_var(ctx.spec.variables, ctx.request.bucket_var)
        held = holdout_points(ctx, ctx.searched, bucket)
    known = measured_costs(ctx)
    pair_s = original_pair_s(ctx)

    def share_reserve(i: int) -> float:
        mine = len(share_of(held, i, count))
        holdout = mine if count == 1 else -(-3 * mine // 2)
        mine_shapes = share_of(ctx.searched, i, count)
        costs = {p.name: known.get(p.name, 0.0) for p in mine_shapes}
        limit = ctx.request.time_limit or 0.0
        base = reserve(costs, holdout, limit, pair_s=pair_s)
        backend = ctx.backend
        can_run = callable(getattr(backend, "measure_paired", None)) and not (
            hasattr(backend, "recorded_check") or hasattr(backend, "has_check")
        )
        if not ctx.tunable.space.knobs or ctx.request.joint or not can_run:
            return base  # no runoff will run (a replay re-measures nothing)
        # the runoff (ktx.search.runoff) runs between the search and the final check
        runoff = sum(reserve_s(pair_s.get(p.name)) for p in mine_shapes)
        return with_runoffs(base, runoff, limit)

    # every worker keeps the largest share's reserve, so that all stop searching together and
    # each checks the configs the studies will hold best (ktx.search.workers.wait_for_searches)
    kept = max(share_reserve(i) for i in range(count))
    ctx.log.write(
        "time_budget", reserved_s=round(kept, 3), search_s=round(deadline - kept - time.monotonic(), 3)
    )
    return deadline - kept


def _studies(ctx: Context) -> list[optuna.Study]:
    return _studies_in(ctx.storage)


def _studies_in(storage: optuna.storages.BaseStorage) -> list[optuna.Study]:
    names = [s.study_name for s in optuna.get_all_study_summaries(storage, include_best_trial=False)]
    return [optuna.load_study(study_name=n, storage=storage) for n in names]


def _jsonable(req: TuneRequest) -> dict[str, Any]:
    data = {k: (str(v) if isinstance(v, Path) else v) for k, v in req.__dict__.items()}
    if data.get("storage"):
        data["storage"] = redact(str(data["storage"]))
    clean: dict[str, Any] = json.loads(json.dumps(data, default=str))
    return clean
