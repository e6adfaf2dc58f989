"""A worker process of ``ktx tune --workers N``: its share of everything that is not the search.

Issue 23 item 7: a 200 s tune over 21 shapes on 4 GPUs made 2.9x the evaluations of one GPU, not
4x. The main process measured the originals, the final checks and the held-out checks itself, one
after another on one GPU, while the other three sat idle (or, before and after the workers, did
not exist). Here every phase that measures is split the same way, each worker taking every
N-th shape from its own offset (:func:`ktx.search.runner.share_of`):

1. the originals of its shapes (:func:`ktx.search.runner.prepare_share`);
2. the search of the same shapes, alone, in a study storage of its own (below), up to a deadline
   that reserves time only for the worker's own share of what follows
   (:func:`ktx.search.runner.search_until`); then it merges its trials into the run's storage
   (with fewer shapes than workers, every worker searches every shape in the run's storage
   instead, and checks once all have stopped: :func:`owns_shapes`);
3. the paired final check of its shapes (no other process searches them, so their best configs
   are final once it stops), stored in the shape's study as ``paired``;
4. once every worker has stopped searching and merged (a barrier of files in the run folder:
   the held-out points need other workers' shapes), the held-out points of its share, measured
   ahead: the original and the best configs of the two nearest tuned shapes, one of which the
   dispatch table will choose there.

Why each worker searches its own shapes in its own storage (session 9, issue 23): with every
worker searching every shape in the run's one SQLite study, 3 workers on 3 H200s made 1.13x the
measurements of one: each worker ~1.2 s a measurement within a shape, the single process ~0.27 s.
Every trial there is several write transactions into that one file from every worker (ask, two
user attributes, tell, the grid's next enqueue, heartbeats), and every worker enumerated every
shape's space (the plan, the grid; seconds of CPU a shape on a loaded host). Which of these cost
the GPU host its second is not settled on a CPU: where SQLite was built without ``usleep`` its
busy handler sleeps a whole second per lock collision (``scripts/gpu_issue23_workers.sh`` probes
the host's); emulated on a CPU, the shared design waited on the lock 17 times in the search of
a 2-worker 60 s run, this one never (tests/search/test_workers.py). Now the search touches only the
worker's own file (one writer: no lock to wait for), each shape's space is enumerated by one
process, and the run's storage is written once per worker, serialised by a file lock
(:func:`merge_private`). A run killed mid-search leaves the worker files behind; the next run
merges them first (:func:`merge_leftovers`), so resume loses nothing a worker finished.

The main process then reads the checks from the studies (a check of the config the study still
holds best is kept; anything else it measures itself) and finds the held-out measurements in the
run's cache, so that after the workers it writes the outputs and measures little or nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import optuna
from ktx.ir.errors import KtxError
from optuna.trial import TrialState

from ktx.search import runner
from ktx.search.dispatch import choose_bucket_var
from ktx.search.engine import best_measurement, fail_running, open_study
from ktx.search.final import WRITE_S
from ktx.search.paired import PairedCheck
from ktx.search.report import Summary
from ktx.search.runlog import RunLog
from ktx.search.runner import (
    BARRIER_ENV,
    WORKERS_ENV,
    Context,
    collect,
    holdout_points,
    measured_costs,
    paired_checks,
    prepare_share,
    run_deadline,
    runoffs,
    search_until,
    share_of,
    study_name,
    tune_joint,
    tune_shapes,
)
from ktx.search.runoff import Runoff
from ktx.search.study import default_url, is_run_folder_url, open_storage, redact
from ktx.spec import ShapePoint
from ktx.specload import load_spec

#: The study attribute holding the worker's final check of that shape (a PairedCheck's dict).
PAIRED_ATTR = "paired"


def worker_count() -> int:
    return max(1, int(os.environ.get(WORKERS_ENV) or 1))


def run_worker(ctx: Context, own_deadline: float | None) -> None:
    """The whole life of worker ``ctx.request.worker_index`` (see the module docstring)."""
    index, count = ctx.request.worker_index or 0, worker_count()
    deadline = run_deadline(own_deadline)
    prepare_share(ctx, deadline)
    joint = ctx.request.joint
    until = search_until(ctx, deadline, 1 if joint else count)
    started = time.monotonic()
    alone = not joint and owns_shapes(ctx.points, count)
    try:
        if alone:
            search_share(ctx, index, count, until)
        else:  # one study per shape (or the joint one) shared by every worker
            (tune_joint if joint else tune_shapes)(ctx, until)
    finally:  # a worker that failed must not keep the others waiting
        mark_searched(index)
    if joint or not ctx.tunable.space.knobs:
        return  # one joint study: the main process checks its one config
    # the checks and the measurements ahead end before the main process's own writing
    tail = None if deadline is None else deadline - WRITE_S
    if alone:  # nobody else searches these shapes: their best configs are final already
        check_share(ctx, index, count, tail)
        wait_for_searches(ctx, count, until, time.monotonic() - started, tail)
    else:  # another worker may still find a better config of a shape this one checks
        wait_for_searches(ctx, count, until, time.monotonic() - started, tail)
        check_share(ctx, index, count, tail)
    measure_holdout_ahead(ctx, index, count, tail)


def owns_shapes(points: Sequence[ShapePoint], count: int) -> bool:
    """Whether each worker searches shapes of its own (every worker has one at least); with
    fewer shapes than workers they share every shape's study, as before session 9, so that no
    GPU sits idle.

    >>> from ktx.spec import ShapePoint
    >>> shapes = [ShapePoint((("tokens", t),)) for t in (1, 16, 256)]
    >>> owns_shapes(shapes, 3), owns_shapes(shapes, 4)
    (True, False)
    """
    return len(points) >= count


#: The folder of the run whose files are the workers' own study storages.
PRIVATE_DIR = "worker-studies"
#: A study attribute of a worker's own storage: how many trials were copied in from the run's.
COPIED_ATTR = "ktx_copied"
FINISHED = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)


def private_path(run_dir: Path, index: int) -> Path:
    return run_dir / PRIVATE_DIR / f"{index}.db"


def search_share(ctx: Context, index: int, count: int, until: float | None) -> None:
    """Search this worker's shapes alone, in its own storage, as one process would search
    them (the run's seed, the whole grid, warm starts from its earlier shapes); then merge
    the trials into the run's storage, even after a failure (what was measured is kept)."""
    mine = share_of(ctx.points, index, count)
    if not mine:
        return
    path = private_path(ctx.run_dir, index)
    private = open_private(ctx, path, mine)
    req = ctx.request
    seed = None if req.seed is None else req.seed - index  # worker_argv gave it seed + index
    alone = dataclasses.replace(req, worker_index=None, storage=None, workers=1, seed=seed)
    own = dataclasses.replace(ctx, request=alone, storage=private, points=mine, skipped=())
    try:
        tune_shapes(own, until)
    finally:
        clock = time.monotonic()
        merged = merge_private(ctx.run_dir, ctx.storage, private)
        remove_db(path)
        # the merge's seconds (the wait for other workers' merges included) come out of the
        # reserve after the search: 5-13 s for 70-90 trials on a loaded 2-core host
        spent = round(time.monotonic() - clock, 3)
        ctx.log.write("worker_merged", trials=merged, shapes=[p.name for p in mine], seconds=spent)


def remove_db(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(FileNotFoundError):
            Path(f"{path}{suffix}").unlink()


def open_private(ctx: Context, path: Path, points: Sequence[ShapePoint]) -> optuna.storages.BaseStorage:
    """A fresh storage of this worker's own holding the run's studies of ``points`` (their
    attributes, the original's measurement among them, and their finished trials: a resumed
    run's budget, grid and warm starts go on from there)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_db(path)  # a leftover of a killed run was merged by the main process before us
    private = open_storage(f"sqlite:///{path.resolve()}")
    for point in points:
        name = study_name(ctx, point)
        shared = open_study(ctx.storage, name, optuna.samplers.RandomSampler())
        trials = shared.get_trials(deepcopy=False, states=FINISHED)
        own = open_study(private, name, optuna.samplers.RandomSampler())
        for key, value in shared.user_attrs.items():
            own.set_user_attr(key, value)
        own.add_trials(sorted(trials, key=lambda t: t.number))
        own.set_user_attr(COPIED_ATTR, len(trials))
    return private


@contextlib.contextmanager
def merge_lock(run_dir: Path) -> Iterator[None]:
    """One merge into the run's storage at a time: a process waiting here is woken as soon as
    the lock is free, where SQLite's busy handler would sleep (a second at a time where it was
    built without ``usleep``) and retry."""
    folder = run_dir / PRIVATE_DIR
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / ".merge.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def merge_private(
    run_dir: Path, shared: optuna.storages.BaseStorage, private: optuna.storages.BaseStorage
) -> int:
    """Add the trials a worker finished in its own storage (those after the ones copied in) to
    the run's studies, with the study attributes it set; returns how many trials were added."""
    added = 0
    with merge_lock(run_dir):
        for summary in optuna.get_all_study_summaries(private, include_best_trial=False):
            own = optuna.load_study(study_name=summary.study_name, storage=private)
            attrs = own.user_attrs
            copied = int(attrs.get(COPIED_ATTR, 0))
            new = [t for t in own.get_trials(deepcopy=False, states=FINISHED) if t.number >= copied]
            study = open_study(shared, summary.study_name, optuna.samplers.RandomSampler())
            held = study.user_attrs
            for key, value in attrs.items():
                if key != COPIED_ATTR and held.get(key) != value:
                    study.set_user_attr(key, value)
            study.add_trials(sorted(new, key=lambda t: t.number))
            added += len(new)
            if new:  # merged: a second merge of this file (a worker killed before removing it) adds nothing
                own.set_user_attr(COPIED_ATTR, max(t.number for t in own.get_trials(deepcopy=False)) + 1)
    return added


def merge_leftovers(run_dir: Path, shared: optuna.storages.BaseStorage) -> int:
    """Merge the worker storages a killed run left in ``run_dir`` (then remove them): the main
    process does this before it starts its workers or searches alone."""
    folder = run_dir / PRIVATE_DIR
    added = 0
    for path in sorted(folder.glob("*.db")) if folder.is_dir() else []:
        private = open_storage(f"sqlite:///{path.resolve()}")
        added += merge_private(run_dir, shared, private)
        if isinstance(private, optuna.storages.RDBStorage):
            private.engine.dispose()
        remove_db(path)
    return added


def barrier_dir() -> Path | None:
    text = os.environ.get(BARRIER_ENV)
    return Path(text) if text else None


def mark_searched(index: int) -> None:
    folder = barrier_dir()
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / str(index)).touch()


def wait_for_searches(
    ctx: Context, count: int, until: float | None, searched_s: float, tail: float | None
) -> None:
    """Wait until every worker has stopped searching, so that the checks are of the configs the
    studies will hold best. Workers under a time limit stop together (at ``until``, give or take
    one measurement); a worker that stopped early (its shapes' budgets spent) waits at most until
    then plus one original's cost, and never past ``tail``. Without a limit it waits at most as
    long as its own search took (the budgets are the same for every worker)."""
    folder = barrier_dir()
    if folder is None or count <= 1:
        return
    if until is None:
        limit = time.monotonic() + max(5.0, searched_s)
    else:
        grace = max(0.5, max(measured_costs(ctx).values(), default=0.5))
        limit = max(time.monotonic(), until) + grace
    if tail is not None:
        limit = min(limit, tail)
    start = time.monotonic()
    while len(list(folder.iterdir())) < count and time.monotonic() < limit:
        time.sleep(0.05)
    done = len(list(folder.iterdir()))
    ctx.log.write("searches_done", seen=done, of=count, waited_s=round(time.monotonic() - start, 3))


def measured_points(ctx: Context, points: Sequence[ShapePoint]) -> list[ShapePoint]:
    """The points whose original some process of the run measured (the others are not checked)."""
    out = []
    for point in points:
        attrs = open_study(ctx.storage, study_name(ctx, point), optuna.samplers.RandomSampler()).user_attrs
        if "original" in attrs and "metric" in attrs:
            out.append(point)
    return out


def check_share(ctx: Context, index: int, count: int, deadline: float | None) -> None:
    """The paired final check of this worker's shapes, each stored in its study."""
    mine = measured_points(ctx, share_of(ctx.points, index, count))
    if not mine:
        return
    results = collect(ctx, mine)
    ran: dict[str, Runoff] = {}
    if ctx.tunable.space.knobs and not ctx.request.joint:
        # the runoff first (ktx.search.runoff), stored in the studies: the main process's
        # finalize finds it there and checks the same configs
        ran = runoffs(ctx, results, deadline)
        if any(r.changed for r in ran.values()):
            results = collect(ctx, mine)
    checks = paired_checks(ctx, results, deadline, None, ran)
    for point in mine:
        check = checks.get(point.name)
        if check is not None:
            study = open_study(ctx.storage, study_name(ctx, point), optuna.samplers.RandomSampler())
            study.set_user_attr(PAIRED_ATTR, check.to_dict())


def worker_checks(ctx: Context) -> dict[str, PairedCheck]:
    """The final checks the workers stored, by shape (for :func:`ktx.search.runner.finalize`'s
    ``keep``: a check of another config than the study's best is measured again there)."""
    out: dict[str, PairedCheck] = {}
    for point in ctx.searched:
        attrs = open_study(ctx.storage, study_name(ctx, point), optuna.samplers.RandomSampler()).user_attrs
        data = attrs.get(PAIRED_ATTR)
        if isinstance(data, dict):
            out[point.name] = PairedCheck.from_dict(data)
    return out


def neighbours(point: ShapePoint, tuned: Sequence[ShapePoint], bucket: str) -> list[ShapePoint]:
    """The tuned shapes nearest ``point`` along ``bucket`` (one below, one above), the other
    dimensions equal: the dispatch table gives ``point`` the config of one of them.

    >>> from ktx.spec import ShapePoint
    >>> p = lambda t, d: ShapePoint((("tokens", t), ("d", d)))
    >>> [q.name for q in neighbours(p(8, 64), [p(1, 64), p(4, 64), p(16, 64), p(4, 32)], "tokens")]
    ['tokens=4,d=64', 'tokens=16,d=64']
    """
    here = point.as_dict()
    fixed = {k: v for k, v in here.items() if k != bucket}
    same = [q for q in tuned if {k: v for k, v in q.as_dict().items() if k != bucket} == fixed]
    below = [q for q in same if q.as_dict()[bucket] < here[bucket]]
    above = [q for q in same if q.as_dict()[bucket] > here[bucket]]
    out = []
    if below:
        out.append(max(below, key=lambda q: q.as_dict()[bucket]))
    if above:
        out.append(min(above, key=lambda q: q.as_dict()[bucket]))
    return out


def measure_holdout_ahead(ctx: Context, index: int, count: int, deadline: float | None) -> None:
    """Measure this worker's share of the held-out points ahead of the main process: the
    original and the best config of each tuned neighbour, into the run's cache."""
    bucket = choose_bucket_var(ctx.spec.variables, ctx.request.bucket_var)
    tuned = measured_points(ctx, ctx.points)
    points = share_of(holdout_points(ctx, tuned, bucket), index, count)
    typical = max(measured_costs(ctx).values(), default=1.0)
    # a measurement starts only where it can end by the deadline (the main process writes then)
    last = None if deadline is None else deadline - typical
    for point in points:
        if last is not None and time.monotonic() > last:
            ctx.log.write("holdout_ahead_cut", shape=point.name)
            return
        ctx.evaluator.original(point)
        for near in neighbours(point, tuned, bucket):
            study = optuna.load_study(study_name=study_name(ctx, near), storage=ctx.storage)
            found = best_measurement(study)
            if found is not None:
                ctx.evaluator.evaluate(found[0], point, deadline=last)


def run_tune(req: runner.TuneRequest) -> Summary | None:
    """Tune; returns the summary (None in a worker process, which writes no outputs)."""
    if req.trials < 1:
        raise KtxError(f"--trials {req.trials}: need at least 1")
    if req.workers < 1 or req.jobs < 1:
        raise KtxError("--workers and --jobs must be at least 1")
    start = time.monotonic()
    deadline = None if req.time_limit is None else start + req.time_limit
    runner.check_storage(req)
    if req.workers > 1 and not req.is_worker:
        return run_with_workers(req, start, deadline)
    ctx = runner.open_context(req)
    if req.time_limit is not None:
        runner.bound_timeouts(ctx.backend, req.time_limit)
    try:
        if req.is_worker:
            run_worker(ctx, deadline)
            return None
        with runner.run_lock(ctx.run_dir):
            merged = merge_leftovers(ctx.run_dir, ctx.storage)
            if merged:
                ctx.display.message(f"resuming: merged {merged} trial(s) a killed run's workers left")
            if is_run_folder_url(ctx.url, ctx.run_dir):
                stale = sum(fail_running(ctx.storage, s) for s in runner._studies(ctx))
                if stale:
                    ctx.display.message(f"resuming: {stale} trial(s) of a killed run marked FAIL")
            shapes = [p.name for p in ctx.points]
            space = ctx.tunable.space.describe()
            ctx.log.write(
                "start", request=runner._jsonable(req), url=redact(ctx.url), shapes=shapes, space=space
            )
            runner.prepare_all(ctx, deadline)
            (runner.tune_joint if req.joint else runner.tune_shapes)(ctx, runner.search_until(ctx, deadline))
            return runner.finalize(ctx, time.monotonic() - start, deadline, start)
    finally:
        ctx.close()


def run_with_workers(req: runner.TuneRequest, start: float, deadline: float | None) -> Summary:
    """The main process of ``--workers N``: it starts the workers first and opens its own
    backend while they start, then waits and writes the outputs.

    The workers measure the originals, each its share of the shapes on its own GPU, search until
    the run's deadline less the final phases' reserve, check their shares of the shapes and
    measure the held-out points ahead (:mod:`ktx.search.workers`): the main process measuring
    every original serially first, its own start-up before the workers', and the final checks
    and held-out checks serially after them are where a 4-worker run lost its fourth worker
    (issue 23). Its backend asks the device without the copy-bandwidth run, which would share
    worker 0's GPU with that worker's own."""
    spec = load_spec(req.kernel_dir)
    run_dir = runner.run_folder(req, spec)
    url = req.storage or default_url(run_dir, shared=True)
    with runner.run_lock(run_dir):
        log = RunLog(run_dir / "log.jsonl", worker=f"main:{os.getpid()}")
        stale = 0
        storage = open_storage(url, heartbeat=True)
        # before any worker runs: a killed run's workers' own studies, then its live trials
        merged = merge_leftovers(run_dir, storage)
        if is_run_folder_url(url, run_dir):
            stale = sum(fail_running(storage, s) for s in runner._studies_in(storage))
        shapes = [p.name for p in runner.select_points(spec, req.shapes)]
        log.write("start", request=runner._jsonable(req), url=redact(url), shapes=shapes)
        procs, barrier = runner.spawn_workers(req, run_dir, url, deadline)
        log.write("workers_started", count=len(procs), pids=[p.pid for p in procs])
        try:
            ctx = runner.open_context(req, bandwidth=False)
            if req.time_limit is not None:
                runner.bound_timeouts(ctx.backend, req.time_limit)
        except BaseException:
            for p in procs:
                p.kill()
            raise
        try:
            if merged:
                ctx.display.message(f"resuming: merged {merged} trial(s) a killed run's workers left")
            if stale:
                ctx.display.message(f"resuming: {stale} trial(s) of a killed run marked FAIL")
            ctx.log.write("space", space=ctx.tunable.space.describe())
            runner.wait_workers(ctx, procs, barrier)
            merge_leftovers(run_dir, ctx.storage)  # a worker that died before merging its own
            runner.unmeasured_after_workers(ctx)
            keep = None if req.joint else worker_checks(ctx)
            return runner.finalize(ctx, time.monotonic() - start, deadline, start, keep)
        finally:
            ctx.close()
