"""``ktx optimize KERNEL_DIR``: the agent loop (analyze, plan, template, test, search) on one kernel.

The rules planner (default) needs no network; ``--planner llm`` asks any OpenAI-compatible
endpoint (key from ``OPENAI_API_KEY`` or ``KTX_LLM_API_KEY``) and falls back to the rules when
the model answers but cannot produce a valid plan. A round the model never answered (a dead
endpoint, a wrong key or model) stops the run with exit 2 (1 if earlier rounds were answered),
the error line first; ``--llm-fallback`` lets the rules plan such rounds instead, with a warning
on the console and a note in the summary. The run folder (``--out``, default
``.ktx/optimize/<kernel>``) holds the round log, the studies, the best template and its dispatch
table; ``ktx report RUN_DIR`` turns it into Markdown, HTML and a patch. See ``docs/agent.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ktx.ir.errors import KtxError

from ktx import offline
from ktx.agent.loop import PLANNERS, OptimizeRequest, OptimizeResult, add_report_time, optimize
from ktx.agent.timing import PhaseClock
from ktx.commands._checks import check_number, load_checked_spec, output_folder
from ktx.commands._original import report_failed_originals, warn_tolerances
from ktx.records import FastMathRecord
from ktx.registry import add_plugin_option, run_plugins
from ktx.report.data import dispatched_config, dispatched_fast_math, fast_math_on, read_dispatch
from ktx.search.dispatch import DispatchTable
from ktx.search.runner import select_points


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("optimize", help="plan passes, template, search and verify, round after round")
    p.add_argument("kernel_dir", metavar="KERNEL_DIR", help="a folder with kernel.cu and ktx.toml")
    p.add_argument("--planner", choices=PLANNERS, default="rules", help="rules (default, offline) or llm")
    p.add_argument("--model", metavar="NAME", help="model for --planner llm (or KTX_LLM_MODEL)")
    p.add_argument("--base-url", metavar="URL", help="OpenAI-compatible endpoint (or OPENAI_BASE_URL)")
    p.add_argument("--rounds", type=int, default=6, metavar="N", help="most planning rounds (default 6)")
    p.add_argument(
        "--trials-per-round", type=int, default=40, metavar="N", help="evaluations per shape and round"
    )
    p.add_argument(
        "--budget", type=float, default=None, metavar="SECONDS", help="wall-clock budget of the run"
    )
    p.add_argument("--seed", type=int, default=0, metavar="N", help="sampler seed (default 0)")
    p.add_argument(
        "--backend",
        default="auto",
        metavar="auto|cupy|replay:FILE",
        help="auto (default): the GPU, or without one the recording committed with the kernel",
    )
    p.add_argument(
        "--out", type=Path, default=None, metavar="DIR", help="run folder (default .ktx/optimize/KERNEL)"
    )
    p.add_argument(
        "--shapes", default="", metavar="NAMES", help="shape sets or NAME=VALUE,... shapes; ';' between"
    )
    p.add_argument("--patience", type=int, default=2, metavar="N", help="stop after N rounds without a gain")
    p.add_argument(
        "--min-gain", type=float, default=0.02, metavar="F", help="smallest gain that counts (0.02)"
    )
    p.add_argument("--ncu", choices=("auto", "on", "off"), default="auto", help="Nsight Compute metrics")
    p.add_argument(
        "--llm-attempts", type=int, default=3, metavar="N", help="questions per round before fallback"
    )
    p.add_argument("--llm-timeout", type=float, default=60.0, metavar="S", help="seconds per LLM answer")
    p.add_argument(
        "--llm-fallback",
        action="store_true",
        help="let the rules plan a round the LLM never answered (default: stop, exit non-zero)",
    )
    p.add_argument("--progress", action="store_true", help="show the search's progress lines")
    add_plugin_option(p)
    p.set_defaults(func=run)


def shape_list(text: str) -> tuple[str, ...]:
    """``quick`` or ``tokens=1,d=4096;tokens=64,d=4096``: sets or shapes, ``;`` between shapes."""
    if not text.strip():
        return ()
    if ";" in text or "=" in text:
        return tuple(s.strip() for s in text.split(";") if s.strip())
    return tuple(s.strip() for s in text.split(",") if s.strip())


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def config_text(config: Mapping[str, int] | None) -> str:
    """``original``, or ``K=V,...`` with ``FAST_MATH`` (or any fast-math knob) flagged."""
    if not config:
        return "original"
    text = ",".join(f"{k}={v}" for k, v in config.items())
    return text + (" **fast-math**" if fast_math_on(config) else "")


def render(result: OptimizeResult) -> str:
    final = result.run_dir / "final"
    table = final / "dispatch.json"
    dispatch = read_dispatch(table) if result.best_round and table.is_file() else None
    state = _json(result.run_dir / "optimize.json")
    fm = FastMathRecord.from_json(state.get("fast_math") if isinstance(state, dict) else None)
    replay = any(n.startswith("replay:") for n in result.notes)
    head = f"ktx optimize {result.kernel}: {result.run_dir}"
    if replay:  # every number below is the recorded run's; the replay follows its rounds
        head += f" (replay of the recorded run: {len(result.rounds)} round(s), stop: {result.stop_reason})"
    lines = [head, ""]
    lines += [
        "| round | planner | pipeline | status | geomean | note |",
        "| ---: | --- | --- | --- | ---: | --- |",
    ]
    for r in result.rounds:
        speed = "-" if r.geomean_speedup is None else f"{r.geomean_speedup:.3f}x"
        fails = "; ".join(f"{f.name}: no site" for f in r.failures)
        note = "; ".join(x for x in (r.note, fails) if x)
        lines.append(
            f"| {r.index} | {r.plan.planner} | `{r.plan.pipeline}` | {r.status} | {speed} | {note[:80]} |"
        )
    lines += [
        "",
        "| shape | metric | original µs | best µs | speedup | re-measured [95%] | SOL "
        "| config (dispatched) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]

    def f(v: float | None, spec: str) -> str:
        return "-" if v is None else format(v, spec)

    for s in result.shapes:
        row = s.to_json()
        if dispatch is not None:
            config = dispatched_config(dispatch, s.shape)
        else:
            config = dict(s.best_config) if result.best_round and s.wins and s.best_config else None
        lines.append(
            f"| {s.shape} | {s.metric} | {f(row['original_us'], '.2f')} | {f(row['effective_us'], '.2f')} | "
            f"{f(row['speedup'], '.3f')} | {'-' if s.paired is None else s.paired.text()} | "
            f"{f(row['sol_fraction'], '.0%')} | {config_text(config)} |"
        )
    lines += [
        "",
        f"best: round {result.best_round} `{result.pipeline or '(original)'}`, geomean speedup "
        f"{f(result.geomean_speedup, '.3f')}x; stopped: {result.stop_reason}"
        f"{' (as recorded); replayed here in' if replay else ';'} {result.wall_s:.1f} s; "
        f"tokens {result.usage.total_tokens}",
        fast_math_line(result, dispatch, fm),
    ]
    if result.phases is not None and not replay:
        lines.append(result.phases.line())
    if any(s.paired is not None for s in result.shapes):
        lines.append(
            "re-measured: the best config and the original timed again alternately in one worker; "
            "geometric mean of the paired ratios [95% interval]; the table uses a config only where the "
            "interval lies above 1 + --min-gain"
        )
    said = {f"planner stop: {r.plan.rationale}" for r in result.rounds if r.outcome.unanswered}
    lines += [f"note: {n}" for n in (*planner_notes(result), *result.notes) if n not in said]
    return "\n".join(lines)


def fast_math_line(result: OptimizeResult, dispatch: DispatchTable | None, fm: FastMathRecord) -> str:
    """Whether any config the dispatch table runs switches fast math on (and the spec's flag)."""
    flag = " (the spec's build flags already have -use_fast_math)" if fm.spec_flags else ""
    if not result.best_round:
        return f"fast-math: not used; the original kernel is kept{flag}"
    if dispatch is not None:
        used = dispatched_fast_math(dispatch)
    else:  # no dispatch table written: the shapes' winning configs
        used = [
            f"{s.shape} ({', '.join(f'{k}={v}' for k, v in fast_math_on(s.best_config).items())})"
            for s in result.shapes
            if s.wins and fast_math_on(s.best_config)
        ]
    if used:
        return f"fast-math: YES, dispatched configs switch it on at {'; '.join(used)}{flag}"
    return f"fast-math: no dispatched config switches it on{flag}"


#: The defaults of the options a replayed recording may set (register() above).
_DEFAULTS: dict[str, object] = {
    "shapes": "", "rounds": 6, "trials_per_round": 40, "seed": 0, "ncu": "auto", "planner": "rules",
    "patience": 2, "min_gain": 0.02,
}  # fmt: skip


def run(args: argparse.Namespace) -> int:
    clock = PhaseClock()  # the budget and the phase timings count from here
    check_number("--min-gain", args.min_gain, 0, hint="a fraction: 0.02 asks for 2% above the original")
    check_number("--llm-timeout", args.llm_timeout, 0, above=True, hint="seconds per answer, e.g. 60")
    check_number("--seed", args.seed, 0, hint="e.g. --seed 0")
    check_number("--budget", args.budget, 0, above=True, hint="seconds for the whole run, e.g. 1800")
    if args.llm_fallback and args.planner != "llm":
        hint = "add --planner llm, or drop --llm-fallback"
        raise KtxError("--llm-fallback is for --planner llm", None, hint)
    if args.out is not None:
        output_folder(args.out, "--out")
    with clock.timing("load"):  # the spec and its static checks
        spec = load_checked_spec(args.kernel_dir)
    name = spec.name
    auto = args.backend == "auto"
    args.backend, replayed = offline.resolve(args.backend, Path(args.kernel_dir))
    if replayed is not None:  # the recorded run's settings: the only ones the recording answers
        args.out = args.out or Path(".ktx") / "optimize" / f"{name}-replay"
        for key, value in replayed.settings.items():
            if getattr(args, key) == _DEFAULTS.get(key):  # what the user set explicitly stays
                setattr(args, key, ";".join(value) if key == "shapes" else value)
    select_points(spec, shape_list(args.shapes))  # a bad shape is refused before any warning
    warn_tolerances(spec)
    run_dir = args.out or Path(".ktx") / "optimize" / name
    run_plugins(args.plugin, run_dir, args.backend)
    request = OptimizeRequest(
        kernel_dir=Path(args.kernel_dir),
        planner=args.planner,
        model=args.model,
        base_url=args.base_url,
        rounds=args.rounds,
        trials_per_round=args.trials_per_round,
        budget_s=args.budget,
        seed=args.seed,
        backend=args.backend,
        out=args.out,
        shapes=shape_list(args.shapes),
        patience=args.patience,
        min_gain=args.min_gain,
        ncu=args.ncu,
        llm_attempts=args.llm_attempts,
        llm_timeout_s=args.llm_timeout,
        quiet=not args.progress,
        llm_fallback=args.llm_fallback,
    )
    result = optimize(request, clock=clock)
    silent = unanswered_line(result, args.llm_fallback)  # before the summary: the error line first
    if silent:
        print(silent, file=sys.stderr)
        sys.stderr.flush()
    tour: list[str] = []
    if auto:  # the report is written now: its seconds join the run's phases (issue 23 item 6)
        began = time.monotonic()
        tour = list(offline.tour(result.run_dir))
        result = add_report_time(result, time.monotonic() - began)
    text = render(result) + ("\n\n" + "\n".join(tour) if auto else "")
    print(replayed.stamp(text) if replayed is not None else text)
    sys.stdout.flush()
    failed = report_failed_originals(spec, [s.original for s in result.shapes])
    if silent and not args.llm_fallback:
        answered = any(r.outcome.attempts and not r.outcome.unanswered for r in result.rounds)
        return 1 if answered or failed else 2
    return 1 if failed else 0


def unanswered_line(result: OptimizeResult, fallback: bool) -> str:
    """The console line for rounds the LLM never answered: an error (the run stopped there), or
    with ``--llm-fallback`` a warning naming the rounds the rules planned instead."""
    silent = [r for r in result.rounds if r.outcome.unanswered]
    if not silent:
        return ""
    first = silent[0]
    if not fallback:
        why = first.outcome.unanswered.rstrip(".")
        return (
            f"ktx: error: --planner llm: round {first.index}: {why}; the run stopped "
            "(check --base-url, --model and the API key, or add --llm-fallback to let the rules plan "
            "such rounds)"
        )
    rounds = ", ".join(str(r.index) for r in silent)
    return (
        f"ktx optimize: warning: --planner llm: no answer in round(s) {rounds}; the rules planned "
        f"them (--llm-fallback); round {first.index}: {first.outcome.unanswered}"
    )


def planner_notes(result: OptimizeResult) -> list[str]:
    """A note for each round another planner planned, or none did: the table's planner column
    alone is easy to miss."""
    out = []
    for r in result.rounds:
        if r.outcome.unanswered and r.plan.stop:
            out.append(f"round {r.index}: the LLM never answered, so the run stopped: {r.outcome.unanswered}")
        elif r.outcome.fallback:
            out.append(f"round {r.index}: planned by {r.plan.planner}: {r.outcome.fallback}")
    return out
