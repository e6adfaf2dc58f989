"""Replay the llm.c ladder's planning on the CPU: which rounds run at the ladder's budget, which
pipelines and knobs the rules planner proposes, what the final checks cost.

Two modes (both on the staged, unmodified llm.c files; nothing is compiled or launched):

``plan``
    Round 1's plan from the kernel's real facts and the passes' real probes (templates built on
    the CPU), with the originals' measurements from a GPU run's ``recording.json`` (session 9's
    ladder, session 10's call 4): the pipeline, the rationale, the round's knob space and the
    first configs the search measures (:func:`ktx.agent.search.bundle_steps`).

``replay``
    ``ktx optimize`` itself (planner, templates, search, final checks, budget) against a
    MODELLED GPU on a virtual clock: a measurement takes the seconds a real one took (compile,
    verification, the timing's launches from :func:`ktx.measure.cost.timing_seconds`), and its
    time per launch is the nearest measured config of the same shape in the recordings, scaled
    for the knobs that differ (:data:`VEC_FACTOR`, :data:`ONLINE_FACTOR`: the ratios session
    10 measured). The speedups it prints are the model's; the rounds, pipelines, knob spaces,
    evaluations and check costs are the loop's own decisions on those times.

Usage::

    python scripts/s11_ladder_replay.py plan --llmc shared/llmc --recordings DIR...
    python scripts/s11_ladder_replay.py replay --llmc shared/llmc --recordings DIR... \\
        --kernels softmax_forward --budget 470

``--recordings``: folders holding ``<kernel>/recording.json`` (an unpacked ``llmc-runs.tar.gz``'s
``runs/``); the later folder wins for the originals, every folder gives anchors.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ktx.ir import parse  # noqa: E402

from ktx.agent.analysis import Device, analyze, kernel_facts  # noqa: E402
from ktx.agent.catalog import Catalog  # noqa: E402
from ktx.agent.loop import _Templates, probe_passes  # noqa: E402
from ktx.agent.plan import Plan, restrict_knobs  # noqa: E402
from ktx.agent.planner import PlanContext  # noqa: E402
from ktx.agent.rules import RulesPlanner  # noqa: E402
from ktx.agent.search import bundle_steps, restricted, threads_at, tunable_for  # noqa: E402
from ktx.measure.cost import PAIRED_REQUEST_S, pair_seconds, timing_seconds  # noqa: E402
from ktx.measure.gpu import Options  # noqa: E402
from ktx.measure.occupancy import DeviceLimits  # noqa: E402
from ktx.measure.types import Candidate, Measurement, Timing  # noqa: E402
from ktx.registry import default_registry  # noqa: E402
from ktx.spec import ShapePoint, Spec  # noqa: E402
from ktx.specload import load_spec  # noqa: E402
from ktx.template import KnobSpace  # noqa: E402

H200 = DeviceLimits(name="MODELLED NVIDIA H200 (llm.c ladder)", sm_count=132, copy_bandwidth_gbs=4189.5)

#: Time ratios of VEC_LOOPS values (to VEC_LOOPS=1) at a fixed THREADS_PER_ROW, session 10's
#: harness: softmax 8x768 warp a row 22.81 -> 17.06 µs (4), 1x50257 block a row 228.8 -> 180.6
#: (4); fused_residual/layernorm bf16 16-byte packs (8) from session 9's round-4 recordings.
VEC_FACTOR = {1: 1.0, 2: 0.88, 4: 0.77, 8: 0.72}
#: ONLINE value -> time ratio to ONLINE=0, per kind of pair (session 10: the Σx, Σx² pair 0.51-0.75
#: of Welford on fused_residual and 0.94-0.98 on layernorm; softmax's running pair saves a read).
ONLINE_FACTOR = {"softmax": {0: 1.25, 1: 1.0}, "norm": {0: 1.0, 1: 1.02, 2: 0.85}}
#: Wall seconds of one measurement outside its timing: nvcc (about 1.2 s a config, the ladder
#: compiles with nvcc), the worker's request, three verification rounds' launches.
MEASURE_FIXED_S = 1.4
#: The Python reference's throughput (numpy over the shape's bytes) in the verification.
REFERENCE_BYTES_PER_S = 2.0e9


@dataclass(frozen=True)
class Anchor:
    """One measured config: its knobs and its time per launch (single and graph, µs)."""

    config: Mapping[str, int]
    single_us: float
    graph_us: float


def _timing(us: float) -> Timing:
    return Timing(us, us * 0.995, us * 1.005, us * 0.99, us * 1.02, us, 50)


Anchors = dict[str, list[Anchor]]


def load_anchors(folders: Sequence[Path], kernel: str) -> tuple[dict[str, Measurement], Anchors]:
    """The originals (the last folder that has them) and every verified config, by shape."""
    originals: dict[str, Measurement] = {}
    anchors: Anchors = {}
    for folder in folders:
        path = folder / kernel / "recording.json"
        if not path.is_file():
            continue
        for raw in json.loads(path.read_text())["measurements"]:
            m = Measurement.from_dict(raw)
            if not m.ok or m.single is None or m.graph is None:
                continue
            if not m.config:
                originals[m.shape] = m
            else:
                anchors.setdefault(m.shape, []).append(
                    Anchor(dict(m.config), m.single.median_us, m.graph.median_us)
                )
    return originals, anchors


def _vec(config: Mapping[str, int]) -> int:
    return max([1] + [int(v) for k, v in config.items() if k.startswith("VEC")])


def modelled_us(
    anchors: Sequence[Anchor], config: Mapping[str, int], kind: str
) -> tuple[float, float] | None:
    """(single, graph) µs of ``config``: the anchor nearest in THREADS_PER_ROW (then in the other
    knobs), scaled by :data:`VEC_FACTOR` and :data:`ONLINE_FACTOR` for the knobs that differ."""
    if not anchors:
        return None
    tpr = config.get("THREADS_PER_ROW", 1)

    def distance(a: Anchor) -> tuple[float, int]:
        gap = abs(math.log2(max(1, a.config.get("THREADS_PER_ROW", 1))) - math.log2(max(1, tpr)))
        others = sum(1 for k in set(a.config) | set(config) if a.config.get(k, 0) != config.get(k, 0))
        return gap, others

    best = min(anchors, key=distance)
    gap, _ = distance(best)
    factor = VEC_FACTOR.get(_vec(config), 0.72) / VEC_FACTOR.get(_vec(best.config), 0.72)
    table = ONLINE_FACTOR[kind]
    factor *= table.get(config.get("ONLINE", 0), 1.0) / table.get(best.config.get("ONLINE", 0), 1.0)
    factor *= 1.0 + 0.15 * gap  # a THREADS_PER_ROW no anchor has: slower the farther it is
    if tpr == 1:
        factor *= 10.0  # one thread a row: the naive geometry, whatever else is on
    return best.single_us * factor, best.graph_us * factor


class LadderModel:
    """The search's Backend on the model above; measurements and checks sleep their real cost."""

    def __init__(self, spec: Spec, originals: Mapping[str, Measurement],
                 anchors: Mapping[str, Sequence[Anchor]], kind: str) -> None:  # fmt: skip
        self.spec = spec
        self.originals = dict(originals)
        self.anchors = {k: list(v) for k, v in anchors.items()}
        self.kind = kind
        self.limits = H200
        self.fingerprint = f"model:llmc-ladder/{spec.name}"
        self.request_overhead_s = 0.4
        self.measured = 0
        self.slept_s = 0.0
        self.paired: list[tuple[str, int, float]] = []

    def _sleep(self, seconds: float) -> None:
        self.slept_s += seconds
        time.sleep(seconds)

    def _times(self, candidate: Candidate, shape: ShapePoint) -> tuple[float, float]:
        original = self.originals[shape.name]
        assert original.single is not None and original.graph is not None
        if not candidate.config:
            return original.single.median_us, original.graph.median_us
        found = modelled_us(self.anchors.get(shape.name, ()), candidate.config, self.kind)
        if found is None:
            return original.single.median_us * 0.05, original.graph.median_us * 0.05
        return found

    def measure(self, candidate: Candidate, shape: ShapePoint) -> Measurement:
        self.measured += 1
        original = self.originals[shape.name]
        single, graph = self._times(candidate, shape)
        nbytes = original.bytes or 0
        odd = 3 if not candidate.config else 1  # the original is verified at its odd sizes too
        verify_s = odd * (3 * graph * 1e-6 + nbytes / REFERENCE_BYTES_PER_S)
        self._sleep(MEASURE_FIXED_S + verify_s + timing_seconds(single, Options()))
        grid, block, _ = candidate.launch(self.spec, shape)
        return replace(
            original,
            config=dict(candidate.config),
            label=candidate.label,
            single=_timing(single),
            graph=_timing(graph),
            grid=grid,
            block=block,
            bandwidth_gbs=None if not nbytes else nbytes / single / 1e3,
            sol_fraction=None if original.sol_us is None else original.sol_us / single,
        )

    def measure_paired(self, first: Candidate, second: Candidate, shape: ShapePoint, pairs: int,
                       timeout: float | None) -> list[tuple[Measurement, Measurement]]:  # fmt: skip
        a, b = self._times(first, shape), self._times(second, shape)
        spent = PAIRED_REQUEST_S + pairs * pair_seconds(a[0], b[0], Options())
        self.paired.append((shape.name, pairs, spent))
        self._sleep(spent)
        count, self.measured = self.measured, self.measured
        one = [(self._quiet(first, shape, a), self._quiet(second, shape, b)) for _ in range(pairs)]
        self.measured = count
        return one

    def _quiet(self, candidate: Candidate, shape: ShapePoint, times: tuple[float, float]) -> Measurement:
        original = self.originals[shape.name]
        return replace(original, config=dict(candidate.config), label=candidate.label,
                       single=_timing(times[0]), graph=_timing(times[1]))  # fmt: skip


@contextmanager
def virtual_clock() -> Iterator[list[float]]:
    """``time.monotonic`` moves only when ``time.sleep`` is called (the model's costs)."""
    now = [time.monotonic()]
    lock = threading.Lock()
    real = (time.monotonic, time.sleep, time.time)
    offset = time.time() - now[0]

    def sleep(seconds: float) -> None:
        with lock:
            now[0] += max(0.0, seconds)

    time.monotonic = lambda: now[0]
    time.sleep = sleep  # type: ignore[assignment]
    time.time = lambda: now[0] + offset
    try:
        yield now
    finally:
        time.monotonic, time.sleep, time.time = real


def _ladder() -> Any:
    spec = importlib.util.spec_from_file_location("llmc_run", ROOT / "benchmarks" / "llmc" / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["llmc_run"] = module
    spec.loader.exec_module(module)
    return module


def stage(kernel: str, llmc: Path, root: Path) -> Path:
    run = _ladder()
    ladder = next(entry for entry in run.LADDERS if entry.name == kernel)
    return Path(run.stage(ladder, ladder.naive, run.llmc_cuda_dir(llmc), root))


def share_s(kernel: str, budget: float, gpus: int, kernels: Sequence[str]) -> float:
    """``ktx optimize``'s budget for ``kernel`` in ``run.py --budget B --gpus G --kernels ...``:
    its lane's share by weight (the kernels before it in the lane taken to use their shares),
    less the hand-written benches' part (run.py's ``HAND_SHARE``)."""
    run = _ladder()
    chosen = [entry for entry in run.LADDERS if entry.name in kernels]
    for lane in run.lanes(chosen, gpus):
        if any(entry.name == kernel for entry in lane):
            entry = next(e for e in lane if e.name == kernel)
            seconds = budget * entry.weight / sum(e.weight for e in lane)
            hand = seconds * run.HAND_SHARE if entry.hand else 0.0
            return float(max(run.MIN_OPTIMIZE_S, seconds - hand))
    raise SystemExit(f"{kernel} is not in --kernels")


def kind_of(kernel: str) -> str:
    return "softmax" if kernel.startswith("softmax") else "norm"


@dataclass(frozen=True)
class FirstRound:
    """Round 1 as the planner and the search see it."""

    kernel: str
    plan: Plan
    knobs: tuple[tuple[str, tuple[int, ...]], ...]
    configs: int
    first: Mapping[str, list[dict[str, int]]]

    def text(self) -> str:
        lines = [f"## {self.kernel}", f"round 1: `{self.plan.pipeline}`", f"rationale: {self.plan.rationale}"]
        knobs = "; ".join(f"{n} {list(v)}" for n, v in self.knobs)
        lines.append(f"knobs: {knobs} ({self.configs} configs)")
        for shape, steps in self.first.items():
            lines.append(f"first configs at {shape}: " + " | ".join(json.dumps(s) for s in steps[:8]))
        return "\n".join(lines)


def first_round(kernel_dir: Path, originals: Mapping[str, Measurement]) -> FirstRound:
    """Round 1's plan on the real facts and probes, and the configs its search measures first."""
    spec = load_spec(kernel_dir)
    registry = default_registry()
    catalog = Catalog.from_registry(registry)
    facts = kernel_facts(parse(spec.source_text(), str(spec.folder / spec.source)), spec.kernel)
    device = Device(H200.name, H200.sm_count, H200.copy_bandwidth_gbs, H200.max_threads_per_sm)
    pairs = [
        (m, "single" if (m.single and m.single.median_us >= 20.0) else "graph") for m in originals.values()
    ]
    analysis = analyze(spec.name, "", facts, pairs, device, flags=spec.flags)
    templates = _Templates(spec, registry)
    current = Plan((), "the original")
    probes = probe_passes(spec, current, catalog, registry, templates)
    context = PlanContext(spec.name, 1, 5, analysis, catalog, current, (), probes)
    plan = RulesPlanner().plan(context).plan
    template = templates(plan.pipeline)
    restriction = restrict_knobs(template.knobs, plan, catalog)
    space = KnobSpace(restriction.knobs, template.space.constraints)
    tunable = tunable_for(spec, restricted(template, space))
    new = list(plan.names)
    from ktx.agent.loop import bundle_of

    bundle = bundle_of(plan, new)
    first: dict[str, list[dict[str, int]]] = {}
    if bundle is not None:
        for shape in originals:
            point = ShapePoint.from_name(shape)
            env = spec.env(point)
            threads = threads_at(tunable, point)
            first[shape] = bundle_steps(
                tunable.space, bundle[0], bundle[1], env, threads=threads, nbytes=spec.bytes_moved(env)
            )
    configs = sum(1 for _ in tunable.space.configs())
    knobs = tuple((k.name, k.values) for k in tunable.space.knobs)
    return FirstRound(spec.name, plan, knobs, configs, first)


def replay(kernel_dir: Path, out: Path, budget: float, originals: Mapping[str, Measurement],
           anchors: Mapping[str, Sequence[Anchor]], kind: str) -> dict[str, Any]:  # fmt: skip
    """``ktx optimize --planner rules --shapes ladder --budget B`` on the model, virtual clock."""
    from ktx.agent.loop import OptimizeRequest, load_records, optimize

    spec = load_spec(kernel_dir)
    backend = LadderModel(spec, originals, anchors, kind)
    req = OptimizeRequest(kernel_dir=kernel_dir, rounds=6, trials_per_round=40, out=out, shapes=("ladder",),
                          ncu="off", budget_s=budget, seed=0, patience=2, min_gain=0.02)  # fmt: skip
    with virtual_clock() as now:
        started = now[0]
        result = optimize(req, backend=backend)
        wall = now[0] - started
    rounds = []
    for r in load_records(out):
        res = r.get("result") or {}
        rounds.append({
            "round": r["round"], "pipeline": r["pipeline"], "status": r["status"],
            "knobs": r.get("knobs"), "evaluations": res.get("evaluations"),
            "geomean": r.get("geomean_speedup"), "wall_s": r.get("wall_s"),
            "best": {s["shape"]: s.get("best_config") for s in res.get("shapes") or ()},
        })  # fmt: skip
    return {
        "kernel": spec.name, "budget_s": budget, "wall_s": round(wall, 1), "stop": result.stop_reason,
        "rounds": rounds, "measurements": backend.measured,
        "checks": [{"shape": s, "pairs": p, "s": round(t, 2)} for s, p, t in backend.paired],
        "check_s": round(sum(t for _, _, t in backend.paired), 1), "notes": list(result.notes),
    }  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("mode", choices=("plan", "replay"))
    ap.add_argument("--llmc", type=Path, default=ROOT / "shared" / "llmc")
    ap.add_argument("--recordings", type=Path, nargs="+", required=True)
    four = ["softmax_forward", "layernorm_forward", "fused_residual_forward", "encoder_forward"]
    ap.add_argument("--kernels", nargs="+", default=four)
    ap.add_argument("--budget", type=float, default=470.0, help="run.py's --budget (the ladder's)")
    ap.add_argument("--gpus", type=int, default=3, help="run.py's --gpus (lanes share the budget)")
    ap.add_argument("--all-kernels", action="store_true",
                    help="shares as in the full ladder (all seven kernels), not only --kernels")  # fmt: skip
    ap.add_argument("--json", type=Path, help="write the replay's results here")
    args = ap.parse_args(argv)
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="s11-replay-") as tmp:
        for kernel in args.kernels:
            originals, anchors = load_anchors(args.recordings, kernel)
            if not originals:
                print(f"{kernel}: no recording with its originals in {args.recordings}", file=sys.stderr)
                continue
            folder = stage(kernel, args.llmc, Path(tmp) / "stage")
            if args.mode == "plan":
                print(first_round(folder, originals).text() + "\n")
                continue
            names = [e.name for e in _ladder().LADDERS] if args.all_kernels else args.kernels
            budget = share_s(kernel, args.budget, args.gpus, names)
            out = replay(folder, Path(tmp) / "runs" / kernel, budget, originals, anchors, kind_of(kernel))
            results.append(out)
            print(json.dumps(out, indent=1, default=str))
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
