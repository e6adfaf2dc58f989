"""``ktx tune --workers N``: the workers do every measuring phase side by side (issue 23 item 7).

On the replay backend over a SYNTHETIC recording, with its throttle (a real sleep per
measurement) standing in for GPU time. The workers are real processes, so these tests run on the
real clock: the first checks who measured what (no timing in it), the second the ratio of
evaluations against one worker with a margin wide enough for a loaded two-core host.
"""

from __future__ import annotations

import doctest
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import optuna
import pytest

from ktx.cli import main
from ktx.measure.types import Candidate, Measurement
from ktx.search import runner, synthetic, workers
from ktx.search.engine import GridFeed, Settings, open_study, search_shape
from ktx.search.recording import Recording, RecordingBackend, write
from ktx.search.runlog import RunLog, read_log
from ktx.search.runner import share_of
from ktx.search.study import open_storage
from ktx.spec import ShapePoint

from .conftest import ROOT, SILU, TUNED, TUNED_ARG
from .test_engine import P256, SPEC, evaluator

sys.path.insert(0, str(ROOT / "scripts"))
from issue23_timeline import timeline


def test_the_examples_in_the_workers_module() -> None:
    result = doctest.testmod(workers)
    assert result.attempted > 0 and result.failed == 0


def test_held_out_neighbours_are_the_nearest_tuned_shapes_with_the_other_dimensions_equal() -> None:
    def p(t: int, d: int) -> ShapePoint:
        return ShapePoint((("tokens", t), ("d", d)))

    tuned = [p(1, 4096), p(16, 4096), p(256, 4096), p(1, 11008), p(64, 11008)]
    assert workers.neighbours(p(4, 4096), tuned, "tokens") == [p(1, 4096), p(16, 4096)]
    assert workers.neighbours(p(8, 11008), tuned, "tokens") == [p(1, 11008), p(64, 11008)]
    assert workers.neighbours(p(1024, 4096), tuned, "tokens") == [p(256, 4096)]  # none above
    assert workers.neighbours(p(4, 8192), tuned, "tokens") == []


@pytest.mark.slow  # worker processes searching real shares (about 15-20 s)
def test_the_workers_grid_shares_partition_the_grid_and_a_share_is_searched_alone(
    recording: Recording, tmp_path: Path
) -> None:
    """Two workers' shares of a shape's grid: disjoint, together every feasible config; one
    worker searching alone measures exactly its share, then stops (issue 23: queueing the whole
    grid up front cost a SQLite commit per config, and with workers a scan of the study each)."""
    space = recording.space

    def key(params: Any) -> str:
        return json.dumps(dict(params), sort_keys=True)

    feasible = {key(space.to_params(c)) for c in space.feasible_configs(SPEC.env(P256))}
    storage = open_storage(f"sqlite:///{tmp_path / 'study.db'}")
    study = open_study(storage, "g", optuna.samplers.RandomSampler())
    ev = evaluator(recording)
    shares = [{key(p) for p in GridFeed(study, ev, P256, seed, (i, 2)).todo} for i, seed in ((0, 1), (1, 2))]
    assert not shares[0] & shares[1] and shares[0] | shares[1] == feasible
    log = RunLog(None)
    ev = evaluator(recording, log)
    settings = Settings(trials=10_000, sampler="grid", seed=1)
    search_shape(ev, storage, "g", P256, "graph", settings, share=(1, 2))
    measured = [
        key(space.to_params(space.normalize(e["config"]))) for e in log.events if e["event"] == "measure"
    ]
    assert len(measured) == len(set(measured)) and set(measured) == shares[1]


def tune(recording: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable, "-m", "ktx", "tune", str(SILU), "--backend", f"replay:{recording}",
        "--shapes", TUNED_ARG, "--sampler", "random", "--seed", "1", "--out", str(out), "--quiet", *extra,
    ]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=ROOT)


def process(event: dict[str, Any]) -> str:
    """``main``, ``worker0``, ... (the log names each process ``NAME:PID``)."""
    return str(event["worker"]).split(":")[0]


@pytest.mark.slow
def test_the_workers_check_and_measure_ahead_so_the_main_process_measures_nothing(
    recording_path: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    done = tune(recording_path, out, "--trials", "6", "--workers", "2", "--throttle", "0.02")
    assert done.returncode == 0, done.stderr
    events = list(read_log(out / "log.jsonl"))
    measured = [e for e in events if e["event"] == "measure"]
    assert measured and not [e for e in measured if process(e) == "main"], "the workers measured everything"
    # each worker checked its own share of the shapes, after every worker had stopped searching
    points = [ShapePoint((("tokens", t), ("d", d))) for t, d in TUNED]
    checks = {str(e["shape"]): process(e) for e in events if e["event"] == "paired"}
    want = {p.name: f"worker{i}" for i in range(2) for p in share_of(points, i, 2)}
    assert checks == want
    waits = [e for e in events if e["event"] == "searches_done"]
    assert len(waits) == 2 and all(e["seen"] == 2 for e in waits)
    # the held-out points (the midpoints tokens=4 and 64 at d=4096) were measured ahead by the
    # workers, and the main process found them in the cache
    summary = json.loads((out / "summary.json").read_text())
    held = {row["shape"]: row for row in summary["holdout"]}
    assert set(held) == {"tokens=4,d=4096", "tokens=64,d=4096"}
    assert all(row["original_us"] for row in held.values())
    ahead = {str(e["shape"]) for e in measured if e["shape"] in held}
    assert ahead == set(held)
    assert [r["paired"]["status"] for r in summary["shapes"]] == ["unsupported"] * len(TUNED)


class ThreadClocks:
    """``time.monotonic``, ``time.time`` and ``time.sleep`` per thread: only a thread's own
    sleeps move its clock (the replay's throttle, standing in for GPU time, is one), so each
    worker runs on its own GPU's time, as on a host with one GPU per worker, and the Python work
    between measurements costs nothing: the count of evaluations depends on how the run divides
    its time, not on the machine's load (seconds per shape on a loaded two-core host). What this
    leaves out is each worker's start-up (a process, imports, CUDA): the GPU script
    ``scripts/gpu_issue23_workers.sh`` measures that.

    The worker threads keep step as a conservative discrete-event simulation does: a sleep to
    time T returns only once every other running worker has reached T, or is itself asleep until
    T or later. So when one worker waits for the others (the barrier before the final checks),
    their clocks agree as if they ran side by side. Other threads (the main process's, Optuna's)
    keep their own clock; the main one's catches up with each worker it waits for."""

    EPOCH = 1.8e9

    def __init__(self) -> None:
        self.local = threading.local()
        self.real_sleep = time.sleep
        self.cond = threading.Condition()
        #: per worker thread: [its clock, the time it sleeps until (None: running), done]
        self.workers: dict[int, list[Any]] = {}

    def monotonic(self) -> float:
        return float(getattr(self.local, "now", 1000.0))

    def time(self) -> float:
        return self.monotonic() + self.EPOCH

    def join(self, start: float) -> None:
        """Register the calling thread as a worker starting at ``start``."""
        self.local.now = start
        with self.cond:
            self.workers[threading.get_ident()] = [start, None, False]

    def leave(self) -> None:
        with self.cond:
            self.workers[threading.get_ident()][2] = True
            self.cond.notify_all()

    def sleep(self, seconds: float) -> None:
        target = self.monotonic() + max(0.0, seconds)
        me = threading.get_ident()
        if me not in self.workers:  # not a worker: its own clock only
            with self.cond:
                running = any(not done for _, _, done in self.workers.values())
            if running:  # the main process watching its workers: it waits on their time
                self.real_sleep(min(seconds, 0.05))
            else:
                self.local.now = target
            return
        with self.cond:
            mine = self.workers[me]
            mine[1] = target
            self.cond.notify_all()

            def behind() -> bool:
                return any(
                    not done and (until if until is not None else now) < target
                    for ident, (now, until, done) in self.workers.items()
                    if ident != me
                )

            while behind():
                self.cond.wait(0.05)
            mine[0], mine[1] = target, None
            self.local.now = target
            self.cond.notify_all()


class ThreadWorker:
    """A worker run in a thread of this process, shaped like the ``Popen`` the runner keeps."""

    def __init__(self, index: int, argv: list[str], clocks: ThreadClocks) -> None:
        self.pid = 100 + index
        self.code: int | None = None
        self.clocks = clocks
        self.end = start = clocks.monotonic()
        ready = threading.Event()

        def body() -> None:
            clocks.join(start)
            ready.set()
            try:
                self.code = main(argv)
            finally:
                self.end = clocks.monotonic()
                clocks.leave()

        self.thread = threading.Thread(target=body, name=f"worker{index}", daemon=True)
        self.thread.start()
        ready.wait()

    def poll(self) -> int | None:
        return None if self.thread.is_alive() else self.code

    def wait(self) -> int | None:
        """Join, and bring the caller's clock up to the worker's end (the main process waited)."""
        self.thread.join()
        self.clocks.local.now = max(self.clocks.monotonic(), self.end)
        return self.code

    def kill(self) -> None:
        return None


def paired_by_replay(
    self: RecordingBackend,
    first: Candidate,
    second: Candidate,
    point: ShapePoint,
    pairs: int,
    timeout: float | None = None,
) -> list[tuple[Measurement, Measurement]]:
    """The final check on the replay backend (which cannot re-measure): one request costing one
    throttle, as a timing-only request to the GPU worker costs about one verified measurement,
    answered with the recorded measurements."""
    time.sleep(self.throttle_s)
    return [(self._replay.measure(first, point), self._replay.measure(second, point)) for _ in range(pairs)]


def run_on_thread_clocks(
    monkeypatch: pytest.MonkeyPatch, recording: Path, out: Path, workers: int, shapes: str, *extra: str
) -> dict[str, Any]:
    """``ktx tune`` in this process, its workers in threads, every thread on its own clock."""
    clocks = ThreadClocks()
    monkeypatch.setattr(time, "monotonic", clocks.monotonic)
    monkeypatch.setattr(time, "time", clocks.time)
    monkeypatch.setattr(time, "sleep", clocks.sleep)
    monkeypatch.setattr(RecordingBackend, "measure_paired", paired_by_replay, raising=False)

    def popen(cmd: list[str], env: dict[str, str], stdout: Any = None) -> ThreadWorker:
        """``ktx tune --worker-index I ...`` as the runner starts it, in a thread."""
        for key, value in env.items():  # the run's (KTX_RUN_*): the same for every worker
            if key.startswith("KTX_RUN_"):
                monkeypatch.setenv(key, value)
        index = int(cmd[cmd.index("--worker-index") + 1])
        return ThreadWorker(index, cmd[cmd.index("tune") :], clocks)

    monkeypatch.setattr(runner, "subprocess", SimpleNamespace(Popen=popen, DEVNULL=subprocess.DEVNULL))
    argv = ["tune", str(SILU), "--backend", f"replay:{recording}", "--shapes", shapes, "--sampler", "random"]
    argv += ["--seed", "1", "--out", str(out), "--quiet", "--workers", str(workers), *extra]
    assert main(argv) == 0
    return timeline(out)


#: Seven shapes, tokens 1 to 4096 at d=4096, and the six held-out midpoints between them.
SEVEN = tuple((4**i, 4096) for i in range(7))
MIDPOINTS = tuple((2 * 4**i, 4096) for i in range(6))


@pytest.mark.slow
def test_four_workers_make_at_least_0_9_x_4_the_evaluations_of_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 23's goal on the replay backend, every worker on its own clock (:class:`ThreadClocks`):
    the same 80 s limit, two seconds a measurement, seven shapes with their final checks and six
    held-out points: four workers make at least 0.9 x 4 the search's evaluations of one, the main
    process measures nothing after them, and no final check is cut for time."""
    recording = write(synthetic.recording((*SEVEN, *MIDPOINTS), kernel="silu_and_mul"), tmp_path / "rec.json")
    shapes = ";".join(synthetic.shape_name(t, d) for t, d in SEVEN)
    args = ("--trials", "1000", "--throttle", "2.0", "--time-limit", "80")
    lines = {
        n: run_on_thread_clocks(monkeypatch, recording, tmp_path / f"w{n}", n, shapes, *args) for n in (1, 4)
    }
    capsys.readouterr()
    counts = {n: line["search_evaluations"] for n, line in lines.items()}
    assert counts[1] >= 10, counts
    assert counts[4] >= 0.9 * 4 * counts[1], counts
    four = lines[4]
    assert four["main_measured_after_workers"] == 0, four
    # the workers measure up to the limit less the main process's writing (1 s), give or take
    # the barrier's polling (0.05 s)
    assert four["workers_last_measure_s"] <= 79.1, four
    checks = {c["shape"]: c["status"] for c in four["final_checks"]}
    assert len(checks) == len(four["final_checks"]) == len(SEVEN), four["final_checks"]
    assert "skipped" not in checks.values(), checks


def search_rates(out: Path) -> dict[str, tuple[int, float]]:
    """Per process of a run: (evaluations at the tuned shapes, seconds of its search window),
    the window running from its ``time_budget`` event to the search deadline it set there."""
    events = list(read_log(out / "log.jsonl"))
    tuned = set(next(e["shapes"] for e in events if e["event"] == "start"))
    out_: dict[str, tuple[int, float]] = {}
    for budget in (e for e in events if e["event"] == "time_budget"):
        who = str(budget["worker"])
        count = sum(
            1
            for e in events
            if e["event"] == "measure" and e["worker"] == who and e.get("config") and e["shape"] in tuned
        )
        out_[who] = (count, float(budget["search_s"]))
    return out_


@pytest.mark.slow
def test_two_worker_processes_search_at_0_9_x_2_the_rate_of_one_on_the_wall_clock(
    recording_path: Path, tmp_path: Path
) -> None:
    """Real processes on the real clock, each measurement a two-second sleep (the replay's
    throttle) standing in for the GPU: during the search, two workers make at least 0.9 x 2 the
    evaluations per second of one process (session 9, this host: 0.98 x 2). ThreadClocks'
    virtual time cannot see host-side costs; this can, though with two seconds a measurement on
    this host's SQLite the shared-study design of before session 9 passed too (0.91 x 2): the
    test of lock waits below is the one that catches that design.

    The rate, not the count in the same limit: a worker's start-up (a new Python process, its
    imports, the recording read again) counts against the run's limit, and on a loaded two-core
    host it takes tens of seconds that a GPU host does not (scripts/gpu_issue23_workers.sh
    measures the whole run there). Four shapes, two each: no shape is shared."""
    args = ("--trials", "1000", "--throttle", "2.0", "--time-limit", "90", "--holdout", "none")
    rates = {}
    for n in (1, 2):
        done = tune(recording_path, tmp_path / f"w{n}", "--workers", str(n), *args)
        assert done.returncode == 0, done.stderr
        rates[n] = search_rates(tmp_path / f"w{n}")
    (one,) = rates[1].values()
    assert len(rates[2]) == 2 and all(who.startswith("worker") for who in rates[2]), rates
    assert one[0] >= 10 and all(count >= 5 for count, _ in rates[2].values()), rates
    single = one[0] / one[1]
    both = sum(count / seconds for count, seconds in rates[2].values())
    print(f"evaluations per second of search: one process {single:.3f}, two workers {both:.3f}: {rates}")
    assert both >= 0.9 * 2 * single, rates


@pytest.mark.slow
def test_a_killed_workers_run_resumes_with_every_trial_its_workers_measured(
    recording_path: Path, tmp_path: Path
) -> None:
    """SIGKILL a ``--workers 2`` run mid-search (the main process and its workers): the trials
    in the workers' own storages are merged into the run's by the next run, so each config they
    finished is there as the trial that measured it (a lost trial would come back only as a
    cache hit of the resumed run's), and nothing is measured twice."""
    out = tmp_path / "run"
    cmd = [
        sys.executable, "-m", "ktx", "tune", str(SILU), "--backend", f"replay:{recording_path}",
        "--shapes", TUNED_ARG, "--sampler", "random", "--seed", "1", "--out", str(out), "--quiet",
        "--trials", "30", "--holdout", "none",
    ]  # fmt: skip
    proc = subprocess.Popen(
        [*cmd, "--workers", "2", "--throttle", "0.1"],
        cwd=ROOT,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )

    def searched() -> list[dict[str, Any]]:
        log = out / "log.jsonl"
        return [e for e in read_log(log) if e["event"] == "measure" and e["config"]] if log.exists() else []

    give_up = time.monotonic() + 300
    try:
        while len({process(e) for e in searched()}) < 2 or len(searched()) < 12:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < give_up, "the workers made no progress"
            time.sleep(0.1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the session this test started: its run and workers
        proc.wait(timeout=30)
    killed = {str(e["key"]) for e in searched()}
    assert list((out / workers.PRIVATE_DIR).glob("*.db")), "the killed workers left their storages"

    again = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    assert not list((out / workers.PRIVATE_DIR).glob("*.db"))
    storage = f"sqlite:///{out / 'study.db'}"
    measured, cached = set(), set()
    for summary in optuna.get_all_study_summaries(storage):
        for t in optuna.load_study(study_name=summary.study_name, storage=storage).trials:
            info = t.user_attrs.get("ktx", {})
            if info.get("source") in ("measured", "cache"):
                (measured if info["source"] == "measured" else cached).add(str(info["key"]))
    # a worker's trial in flight at the kill (measured and logged, not yet told) is not in its
    # storage, as a single process's is not: the resumed run finds it in the run's cache
    lost = killed - measured
    assert len(lost) <= 2 and lost <= cached, f"{len(lost)} of {len(killed)} measured trials lost"
    keys = [str(e["key"]) for e in searched()]
    assert len(keys) == len(set(keys)), "a config measured twice over both runs"


#: An ``usleep`` that sleeps whole seconds, as SQLite's fallback does where it was built without
#: ``usleep`` (its busy handler then waits a second per retry), and notes the time of each call:
#: SQLite sleeps only to wait for a lock another connection holds (the busy handler, WAL retries).
BUSY_SHIM = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
int usleep(useconds_t us) {
    const char *path = getenv("KTX_TEST_BUSY_LOG");
    FILE *f = path ? fopen(path, "a") : NULL;
    if (f) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        fprintf(f, "%.3f\n", t.tv_sec + t.tv_nsec / 1e9);
        fclose(f);
    }
    unsigned s = (us + 999999) / 1000000;
    sleep(s ? s : 1);
    return 0;
}
"""


@pytest.mark.slow
def test_worker_processes_never_wait_on_a_storage_lock_while_they_search(
    recording_path: Path, tmp_path: Path
) -> None:
    """Two worker processes, real clock, SQLite's lock waits made whole seconds and counted (an
    LD_PRELOAD ``usleep``, :data:`BUSY_SHIM`): during the search no process waits on a lock.
    Session 9 measured 3 workers on 3 H200s at 0.38 x 3 of one, ~1.2 s a measurement against
    ~0.27 s: every worker wrote its trials into the run's one SQLite study, several transactions
    a trial. On this CPU with the shim that design waited on the lock all through the search
    (1.80 evaluations/s of search over two workers, against 3.17 with workers searching in
    storages of their own); whether the GPU host's SQLite sleeps whole seconds,
    scripts/gpu_issue23_workers.sh's probe says."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None or sys.platform != "linux":
        pytest.skip("needs a C compiler and LD_PRELOAD (Linux)")
    (tmp_path / "shim.c").write_text(BUSY_SHIM)
    shim = tmp_path / "busy.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(shim), str(tmp_path / "shim.c")], check=True)
    waits = tmp_path / "waits.txt"
    env = {**os.environ, "LD_PRELOAD": str(shim), "KTX_TEST_BUSY_LOG": str(waits)}
    out = tmp_path / "run"
    cmd = [
        sys.executable, "-m", "ktx", "tune", str(SILU), "--backend", f"replay:{recording_path}",
        "--shapes", TUNED_ARG, "--sampler", "random", "--seed", "1", "--out", str(out), "--quiet",
        "--trials", "1000", "--throttle", "0.3", "--time-limit", "60", "--holdout", "none",
        "--workers", "2",
    ]  # fmt: skip
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    events = list(read_log(out / "log.jsonl"))
    windows = [
        (float(e["t"]), float(e["t"]) + float(e["search_s"])) for e in events if e["event"] == "time_budget"
    ]
    assert len(windows) == 2 and all(end > start for start, end in windows), windows
    start, end = min(s for s, _ in windows), max(e for _, e in windows)
    slept = [float(line) for line in waits.read_text().split()] if waits.exists() else []
    during = [t for t in slept if start <= t <= end]
    searched = [e for e in events if e["event"] == "measure" and e["config"]]
    assert len(searched) >= 20, len(searched)
    assert not during, f"{len(during)} lock wait(s) during the search ({len(slept)} in the run)"
