"""Issue 22 item 3, checked: for every real-code spec, the template parameters and constexprs that
set block size, items per thread, rows per block or vector width (:mod:`ktx.ir.facts.tuning`),
whether ktx exposes each as a knob (which pass, which domain), and a build of sampled candidates
(nvcc, sm_90, ``ktx``'s own compile path; no GPU): every value of each such knob at least once,
plus random configs of every knob-giving pass combined (for the kernels that have such a setting;
``cpu_check.py --samples`` builds one sample per pass of every spec). Writes ``knobcheck.md`` and
``knobcheck.json``.

    python benchmarks/realcode/knobcheck.py [--ids ID ...] [--combos 3] [--no-build] [--out DIR]

The goal it measures: "every kernel whose block size, items per thread or vector width is a
template parameter or constexpr gets it as a knob, and 0 sampled candidates fail to build where
the original builds". A candidate whose config the knob space rejects for every shape point is
not built (it would never be measured); one the spec's shapes allow is.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from cpu_check import _compile_candidate, ktx_build  # noqa: E402

#: The passes whose knobs may carry an author-made setting, then the other passes sampled with them.
EXPOSING = ("expose", "block-size", "rows-per-block")
OTHERS = ("unroll", "vectorize", "coarsen", "cache-hints")


@dataclass(frozen=True)
class Setting:
    name: str
    kind: str
    role: str
    value: int | None
    knob: str  # "pass:KNOB" or "no: <the pass's reason>"
    domain: tuple[int, ...] = ()
    selected: bool = False  # the spec computes it per shape


@dataclass(frozen=True)
class Built:
    pipeline: str
    config: dict[str, int]
    result: str  # ok | fails: ...


@dataclass
class KernelRow:
    id: str
    original: str = ""
    settings: list[Setting] = field(default_factory=list)
    pipelines: dict[str, str] = field(default_factory=dict)  # pass -> knobs or refusal
    builds: list[Built] = field(default_factory=list)
    error: str = ""


def _feasible(space: Any, config: Mapping[str, int], envs: Sequence[Mapping[str, Any]]) -> bool:
    """Whether some shape point of the spec admits ``config`` (a search would measure it there)."""
    from ktx.ir.errors import KtxError

    for env in envs or [{}]:
        try:
            if not space.violations(space.complete(dict(config)), env):
                return True
        except KtxError:
            continue
    return False


def check_kernel(folder: Path, combos: int, do_build: bool) -> KernelRow:
    from ktx.ir import parse
    from ktx.ir.errors import KtxError
    from ktx.ir.facts.tuning import tuning_params

    from ktx.pipeline import candidate_from_template, template_for_spec
    from ktx.specload import load_spec

    row = KernelRow(folder.name)
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        spec = load_spec("ktx.toml")
        module = parse(spec.source_text())
        name = spec.kernel.split("::")[-1]
        fn = next(k for k in module.kernels if k.name == name)
        params = tuning_params(module, fn, spec.template_args)
        points = [spec.env(p) for p in spec.shape_set().points]
        templates: dict[str, Any] = {}
        remarks: dict[str, str] = {}
        for p in EXPOSING + OTHERS:
            try:
                t = template_for_spec(spec, p)
            except KtxError as exc:
                row.pipelines[p] = "refused: " + str(exc).splitlines()[0][:100]
                continue
            if t.knobs:
                templates[p] = t
                row.pipelines[p] = ", ".join(k.name for k in t.knobs)
            else:
                row.pipelines[p] = "no knob"
            for o in t.outcomes:
                if o.status == "skipped" and p in EXPOSING:
                    remarks.setdefault(o.site, f"{p}: {o.message[:150]}")
        for tp in params:
            knob, domain = _knob_for(tp, templates)
            if knob is None:
                why = remarks.get(tp.name) or remarks.get(fn.name) or "no pass names it"
                row.settings.append(
                    Setting(tp.name, tp.kind, tp.role, tp.value, f"no: {why}", (), tp.spec_selected)
                )
            else:
                row.settings.append(
                    Setting(tp.name, tp.kind, tp.role, tp.value, knob, domain, tp.spec_selected)
                )
        if not do_build or not row.settings:
            return row  # a kernel without such a setting is cpu_check --samples' to build
        row.original = ktx_build(Path("."))
        jobs: list[tuple[str, Any, dict[str, int]]] = []
        by_pass: dict[str, list[str]] = {}
        for s in row.settings:
            if not s.knob.startswith("no:"):
                pname, kname = s.knob.split(":", 1)
                by_pass.setdefault(pname, []).append(kname)
        for pname, knames in by_pass.items():
            jobs += [(pname, templates[pname], c) for c in _covering(templates[pname], knames, points)]
        # A value no shape admits with one pass alone may be admitted with the others' knobs
        # (pre_rms_norm's UNROLL=1 covers 4096 columns with BLOCK_X=512): built there.
        exposing = [p for p in EXPOSING if p in by_pass]
        together = _combined(spec, exposing, template_for_spec) if len(exposing) > 1 else None
        if together is not None:
            done = frozenset((k, v) for _, _, c in jobs for k, v in c.items())
            knames = [k for p in exposing for k in by_pass[p]]
            jobs += [(together.pipeline, together, c) for c in _covering(together, knames, points, done)]
        combined = _combined(spec, [p for p in EXPOSING + OTHERS if p in templates], template_for_spec)
        if combined is not None:
            rng = random.Random(0)
            for _ in range(combos):
                try:
                    cfg = combined.space.sample(rng.randrange(1 << 30), points[0] if points else None)
                except KtxError:
                    break
                jobs.append((combined.pipeline, combined, cfg))
        for pname, t, cfg in jobs:
            try:
                cand = candidate_from_template(spec, t, cfg)
                res = _compile_candidate(spec, cand)
            except KtxError as exc:
                res = "refused: " + str(exc).splitlines()[0][:120]
            except Exception as exc:  # a crash is a result here
                res = f"crashed: {type(exc).__name__}: {str(exc)[:100]}"
            row.builds.append(Built(pname, dict(cfg), res))
    except Exception as exc:
        row.error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:140] if str(exc) else ''}"
    finally:
        os.chdir(cwd)
    return row


def _covering(
    t: Any,
    knames: Sequence[str],
    envs: Sequence[Mapping[str, Any]],
    done: frozenset[tuple[str, int]] = frozenset(),
) -> list[dict[str, int]]:
    """Configs of template ``t`` that give each of ``knames`` every value of its domain at least
    once, greedily: each config covers as many (knob, value) pairs not yet built as a feasible
    config can, so a kernel whose file takes two minutes to build costs about as many builds as
    its longest domain, not their sum. Knobs kept in step by a constraint (``THREADS *
    NUM_PER_TH == 512``) are covered by the configs the constraint admits; a value no shape
    point admits is left out (a search would never measure it). ``done``: (knob, value) pairs
    already built."""
    knobs = [k for k in t.knobs if k.name in knames]
    base = t.space.complete({})
    grid = [
        {**base, **dict(zip([k.name for k in knobs], values, strict=True))}
        for values in itertools.islice(itertools.product(*(k.values for k in knobs)), 20000)
    ]
    feasible = [c for c in grid if _feasible(t.space, c, envs)]
    todo = {(k.name, v) for k in knobs for v in k.values} - done
    out: list[dict[str, int]] = []
    while todo:
        best = max(feasible, key=lambda c: sum((n, c[n]) in todo for n in knames), default=None)
        if best is None or not any((n, best[n]) in todo for n in knames):
            break
        out.append(best)
        todo -= {(n, best[n]) for n in knames}
    return out


def _knob_for(tp: Any, templates: Mapping[str, Any]) -> tuple[str | None, tuple[int, ...]]:
    """The knob that carries ``tp``: expose names it after the setting; block-size's BLOCK_X
    and rows-per-block's ROWS carry a setting of that role when the pass's note names it."""
    for pname, t in templates.items():
        for k in t.knobs:
            if k.name.upper().replace("_", "") == tp.name.upper().replace("_", ""):  # copyUnroll: COPY_UNROLL
                return f"{pname}:{k.name}", tuple(k.values)
    for pname, t in templates.items():
        for k in t.knobs:
            texts = [k.help, k.site] + [o.message for o in t.outcomes]
            if (
                (tp.role == "block" and k.name == "BLOCK_X") or (tp.role == "rows" and k.name == "ROWS")
            ) and any(tp.name in (x or "") for x in texts):
                return f"{pname}:{k.name}", tuple(k.values)
    return None, ()


def _combined(spec: Any, passes: list[str], template_for_spec: Any) -> Any:
    """The template of every knob-giving pass together; a pass that refuses in company is left out."""
    from ktx.ir.errors import KtxError

    kept = list(passes)
    while kept:
        try:
            t = template_for_spec(spec, ",".join(kept))
            return t if t.knobs else None
        except KtxError:
            kept.pop()
    return None


#: The settings no pass makes a knob, read one by one (issue 22 item 3 asks for the precise
#: reason where a knob is unsound). Analysis of the sources, keyed by (kernel, setting); the table
#: shows the pass's own remark beside it.
DECISIONS: dict[tuple[str, str], str] = {
    ("deepspeed__apply_rotary_pos_half", "threadsPerHead"): (
        "not alone: a head is owned by a tile of threadsPerHead threads "
        "(`cg::tiled_partition<threadsPerHead>`, `head_idx = blockIdx.x * (256 / threadsPerHead) + "
        "threadIdx.x / threadsPerHead`), each holding granularity / sizeof(T) elements, and the "
        "rotation partner is the lane `half_dim / T_per_thread` away (`head_group.shfl`). A head is "
        "covered only when threadsPerHead * granularity / sizeof(T) == next_pow2(head_size) (the "
        "launcher: `threads_per_head = padded_head_size / T_per_elem`), and the grid must be "
        "ceil(total_count / (256 / threadsPerHead)). Another threadsPerHead alone leaves half a head "
        "unrotated or rotates with the wrong partner"
    ),
    ("deepspeed__apply_rotary_pos_half", "granularity"): (
        "not alone, see threadsPerHead. Sound only as one knob over the pair with the grid following:"
        " for head_size 128 in halves, (16 B, 16 threads), the spec's, and (8 B, 32 threads); (4 B, "
        "64 threads) does not build on CUDA (`tiled_partition` tiles are at most 32; 64 is the "
        "launcher's ROCm branch). Not built: the relation is the launcher's run-time locals "
        "(`padded_head_size = next_pow2(head_size)`, `heads_per_block`), which the facts layer does "
        "not read, and a knob with one other value is left to the spec (`template_args`, `[vars] "
        "grid`)"
    ),
    ("cuda-samples__scalarProductKernel_native", "NUM_OF_THREADS"): (
        "unsound: the block's reduction `reduceInShared_native` is unrolled by hand for 128 threads "
        "(`if (threadIdx.x < 64) v[threadIdx.x] += v[threadIdx.x + 64]`, then 32, 16, ...): 256 threads "
        "would drop half the partials, 32 or 64 would read past `shArray[NUM_OF_THREADS]`. (Session 9's "
        "table built 7 values; building is not computing the same sum)"
    ),
    ("exllamav2__rms_norm_kernel", "NUM_WARPS"): (
        "unsound: NUM_THREADS = NUM_WARPS * 32 is the launch's block (1024 at 32 warps, the most a block "
        "holds), and the CUDA branch reduces with `sum = sums[lane_id]` over `__shared__ float "
        "sums[NUM_WARPS]`: every lane reads a warp's partial, so NUM_WARPS must equal the warp size; "
        "fewer warps read past `sums`, more cannot launch. (Session 9's domain 32, 64, 128 built, and "
        "launched blocks of 2048 and 4096 threads). The facts read it now "
        "(`ktx.ir.facts.tuning.thread_indexed_shared`: `sums[warp_id]` needs NUM_WARPS >= "
        "ceil_div(block, 32), `sums[lane_id]` needs NUM_WARPS >= min(block, 32)), the rule that bounds "
        "exllamav2 head_norm's MAX_WARPS"
    ),
    ("deepspeed__moe_gather_kernel", "N_TOP_K"): (
        "unsound: N_TOP_K is the number of experts each token was routed to. It lays out the inputs "
        "(`mapped_slots[token_idx * N_TOP_K + i]`, `scores[token_idx * N_TOP_K + i]`; the spec's "
        "`[grid, N_TOP_K]` extents) and sets how many expert rows are summed: another value reads "
        "another layout and computes another sum. The launcher picks it from the caller's `n_top_k` "
        "(`TOP_K_SWITCH`), not from a shape; it is no tuning setting"
    ),
    ("deepspeed__top_k_gating_kernel", "TOP_K"): (
        "unsound: TOP_K is the k of top-k routing, a shape variable of the spec (`{TOP_K}`; the "
        "outputs are `[n_tokens, TOP_K]`); another value computes another routing. The launcher's "
        "`TOP_K_SWITCH` picks the instantiation the caller's k needs; it is no tuning setting"
    ),
}


def table(rows: Sequence[KernelRow], title: str = "") -> list[str]:
    with_settings = [r for r in rows if r.settings]
    settings = [s for r in rows for s in r.settings]
    knobs = [s for s in settings if not s.knob.startswith("no:")]
    per_shape = [s for s in knobs if s.selected]
    exposed = [r for r in with_settings if all(not s.knob.startswith("no:") for s in r.settings)]
    builds = [b for r in rows for b in r.builds]
    fails = [(r.id, b) for r in rows if r.original == "ok" for b in r.builds if not b.result.startswith("ok")]
    out = [
        "# Template and constexpr knobs on the real-code kernels (issue 22 item 3)",
        "",
        "`python benchmarks/realcode/knobcheck.py` (CPU only: nvcc sm_90 through ktx's compile path).",
        "Settings are the facts layer's (`ktx.ir.facts.tuning`); a setting the spec computes per",
        "shape (`{...}` in `template_args`) is the launcher's pick by shape, marked *per shape*: its knob's",
        "0 is that pick, so the original is a point of the space.",
        "",
        *([title, ""] if title else []),
        f"- specs: {len(rows)}; with a block/items/rows/vector setting: {len(with_settings)}",
        f"- settings: {len(settings)}; a knob: {len(knobs)} (per shape, 0 the launcher's pick: "
        f"{len(per_shape)}); no knob: {len(settings) - len(knobs)}",
        f"- kernels with every such setting a knob: {len(exposed)} of {len(with_settings)}",
        f"- candidates built: {len(builds)}; failed where the original builds: {len(fails)}",
        "",
        "| kernel | setting | kind | role | value | knob | domain |",
        "| --- | --- | --- | --- | ---: | --- | --- |",
    ]
    for r in rows:
        for s in r.settings:
            knob = s.knob.replace("|", "\\|")
            dom = ", ".join(map(str, s.domain))
            value = "per shape" if s.selected else ("?" if s.value is None else str(s.value))
            out.append(f"| {r.id} | {s.name} | {s.kind} | {s.role} | {value} | {knob} | {dom} |")
    unexposed = [(r.id, s) for r in rows for s in r.settings if s.knob.startswith("no:")]
    if unexposed:
        out += ["", "## Settings with no knob, read one by one", ""]
        for rid, s in unexposed:
            decision = DECISIONS.get((rid, s.name), "not read yet")
            out.append(f"- **{rid} {s.name}**: {decision}. (The pass: {s.knob[4:].strip()})")
    out += [
        "",
        "## Builds",
        "",
        "| kernel | original | built | failed | first failure |",
        "| --- | --- | ---: | ---: | --- |",
    ]
    for r in rows:
        if r.error:
            out.append(f"| {r.id} | error: {r.error} | 0 | 0 | |")
            continue
        bad = [b for b in r.builds if not b.result.startswith("ok")]
        first = f"{bad[0].pipeline} {bad[0].config}: {bad[0].result}".replace("|", "\\|")[:200] if bad else ""
        out.append(f"| {r.id} | {r.original or '-'} | {len(r.builds)} | {len(bad)} | {first} |")
    return out


def _row_from_json(d: Mapping[str, Any]) -> KernelRow:
    return KernelRow(
        d["id"],
        d.get("original", ""),
        [Setting(**{**s, "domain": tuple(s["domain"])}) for s in d["settings"]],
        dict(d["pipelines"]),
        [Built(**b) for b in d["builds"]],
        d.get("error", ""),
    )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--ids", nargs="*", default=None)
    ap.add_argument("--combos", type=int, default=3, help="random configs of all knob-giving passes together")
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--out", type=Path, default=HERE)
    ap.add_argument("--title", default="", help="a line under the heading (which ktx, which run)")
    ap.add_argument("--render", type=Path, help="only write the table of a knobcheck.json")
    args = ap.parse_args(argv)
    if args.render is not None:
        rows = [_row_from_json(d) for d in json.loads(args.render.read_text())]
        (args.out / "knobcheck.md").write_text("\n".join(table(rows, args.title)) + "\n")
        return 0
    folders = sorted(p.parent for p in HERE.glob("*/ktx.toml"))
    if args.ids:
        folders = [f for f in folders if f.name in args.ids]
    rows = []
    for f in folders:
        row = check_kernel(f, args.combos, not args.no_build)
        bad = sum(1 for b in row.builds if not b.result.startswith("ok"))
        print(
            f"{row.id}: {len(row.settings)} settings, {len(row.builds)} built, {bad} failed {row.error}",
            flush=True,
        )
        rows.append(row)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "knobcheck.md").write_text("\n".join(table(rows, args.title)) + "\n")
    (args.out / "knobcheck.json").write_text(json.dumps([asdict(r) for r in rows], indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
