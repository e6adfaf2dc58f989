"""The CPU part of the real-code benchmark: for every kernel of ``manifest.json``, draft its spec
with the ktx at hand, measure the hand edit, run ``ktx init --check`` on the finished spec and
build the original for sm_90 with nvcc; writes ``cpu_table.md`` (and ``cpu_table.json``).

    python benchmarks/realcode/fetch.py          # once: the sources, into src/ (git-ignored)
    python benchmarks/realcode/cpu_check.py [--ids ID ...] [--no-build] [--out DIR]

Columns: whether ``ktx init`` drafts the kernel (its TODO count) or refuses (its one line); the
kernel's state (a finished spec, or blocked and why: ktx's refusal, or the reason recorded in the
manifest when the draft cannot be finished into a spec that runs the kernel as the project does);
**edited** and **silently wrong** lines, from the committed ``init.diff`` (the edit as made, on the
draft of the ktx named in its header) and again from today's draft to the same finished spec (so
a change to ``ktx init`` shows here without anyone editing anything); ``--check``'s verdict; and
whether nvcc builds the original file (the project's include folders and ``-D`` flags, with
``scripts/corpus_stubs`` standing in for the torch, pybind11 and cuBLAS headers host code uses).
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))

from drafts import Drafted, draft_kernel, kernel_dir, selected, source_path  # noqa: E402
from editstat import edit_classes, stat, unapply, unified  # noqa: E402
from fetch import SRC, load_manifest, projects  # noqa: E402

STUBS = ROOT / "scripts" / "corpus_stubs"
KTX = [sys.executable, "-m", "ktx"]
NVCC_FLAGS = ("-std=c++17", "-x", "cu", "--expt-relaxed-constexpr", "--expt-extended-lambda", "-w")


@dataclass(frozen=True)
class Row:
    id: str
    project: str
    split: str
    kind: str
    init: str  # "N TODOs" | "refused: ..." | "crashed: ..."
    state: str  # "spec" | "blocked: ..." | "no spec yet"
    edited: int | None = None  # from the committed init.diff
    silent: int | None = None
    edited_now: int | None = None  # today's draft -> the finished spec
    silent_now: int | None = None
    draft_same: bool | None = None  # today's draft is the one init.diff was made on
    check: str = ""
    ktx_build: str = ""  # the original built as ktx builds it, from the spec
    build: str = ""  # the original file built with the project's flags
    silent_lines: tuple[str, ...] = ()  # the draft lines of init.diff that were wrong without a TODO
    samples: tuple[tuple[str, str], ...] = ()  # (pass, ok | no knob | refused: | fails:), --samples
    classes_now: tuple[tuple[str, int], ...] = ()  # today's edited lines by what they say (editstat)


def nvcc_command(
    kernel: Mapping[str, Any], pin_include: Sequence[str], defines: Sequence[str], src: Path, cubin: bool
) -> list[str]:
    path = source_path(kernel, src)
    root = src / kernel["project"]
    cmd = ["nvcc", *NVCC_FLAGS, "-arch=sm_90", "-cubin" if cubin else "-ptx", "-o", os.devnull, str(path)]
    cmd += [f"-I{path.parent}", *(f"-I{root / d}" for d in pin_include), f"-I{STUBS}"]
    return cmd + [f"-D{d}" for d in defines]


def build(cmd: Sequence[str], cache: Path) -> str:
    """``ok`` or ``fails: <first error line>``, cached on the command and the files it reads
    (several kernels share a file: it is built once)."""
    key = hashlib.sha256("\0".join(cmd).encode())
    for arg in cmd:
        if arg.startswith("/") and Path(arg).is_file():
            key.update(Path(arg).read_bytes())
    hit = cache / key.hexdigest()[:24]
    if hit.exists():
        return hit.read_text()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        if proc.returncode == 0:
            out = "ok"
        else:
            errs = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "error" in ln]
            first = (errs or (proc.stdout + proc.stderr).splitlines() or ["?"])[0]
            out = "fails: " + first.replace(str(SRC) + "/", "")[:160]
    except subprocess.TimeoutExpired:
        out = "fails: nvcc over 900 s"
    cache.mkdir(parents=True, exist_ok=True)
    hit.write_text(out)
    return out


def check(folder: Path) -> str:
    """``ktx init --check`` on a finished spec: ``ready``, or its first line."""
    proc = subprocess.run(
        [*KTX, "init", "--check", "."], cwd=folder, capture_output=True, text=True, timeout=600
    )
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    if proc.returncode == 0:
        return "ready" + (f" ({len(lines) - 1} unbounded)" if len(lines) > 1 else "")
    return f"blocks: {lines[0][:140] if lines else proc.returncode}"


def ktx_build(folder: Path) -> str:
    """The original compiled the way ``ktx run`` compiles it (the spec's flags and include folders,
    nvcc for sm_90, the kernel found by its name expression in the cubin), in the spec's folder
    as ``run.py`` runs ktx: ``ok`` or the first error line. ``--check`` reads the spec, this
    proves the harness can build what it names (a kernel in a namespace, say, it cannot)."""
    from ktx.measure.compile import CompileRequest, compile_kernel
    from ktx.measure.overload import overload_params
    from ktx.measure.types import original_candidate
    from ktx.spec import expand
    from ktx.specload import load_spec

    cwd = os.getcwd()
    os.chdir(folder)
    try:
        spec = load_spec("ktx.toml")
        cand = original_candidate(spec)
        point = spec.shape_set().points[0]
        name = expand(cand.name_expression, cand.env(spec, point))
        source = spec.compile_source(cand.source)
        pick = overload_params(source, spec.kernel, [a.name for a in spec.args])
        res = compile_kernel(
            CompileRequest(source, name, tuple(cand.flags), "90", spec.include_dirs, "nvcc", param_names=pick)
        )
    except Exception as exc:
        return f"fails: {type(exc).__name__}: {str(exc).splitlines()[0][:140]}"
    finally:
        os.chdir(cwd)
    if res.ok:
        return "ok"
    errs = [ln for ln in res.log.splitlines() if "error" in ln] or res.log.splitlines() or ["?"]
    return "fails: " + errs[0][:160]


def ktx_version() -> str:
    """The ktx that drafts: the tree hashes of ``ktx/`` and ``ir/`` plus any uncommitted change to
    them, so that a cached draft is reused only with the very code that made it."""
    trees = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD:ktx", "HEAD:ir"], capture_output=True, text=True
    )
    dirty = subprocess.run(
        ["git", "-C", str(ROOT), "diff", "HEAD", "--", "ktx", "ir"], capture_output=True, text=True
    )
    return hashlib.sha256((trees.stdout + dirty.stdout).encode()).hexdigest()[:16]


#: The passes ``--samples`` instantiates once each (a random feasible config, seed 0) and builds.
SAMPLE_PASSES = ("block-size", "unroll", "vectorize", "coarsen", "cache-hints", "rows-per-block")


def _compile_candidate(spec: Any, cand: Any) -> str:
    from ktx.measure.compile import CompileRequest, compile_kernel
    from ktx.measure.overload import overload_params
    from ktx.spec import expand

    point = spec.shape_set().points[0]
    name = expand(cand.name_expression, cand.env(spec, point))
    source = spec.compile_source(cand.source)
    pick = overload_params(source, spec.kernel, [a.name for a in spec.args])
    req = CompileRequest(source, name, tuple(cand.flags), "90", spec.include_dirs, "nvcc", param_names=pick)
    res = compile_kernel(req)
    if res.ok:
        return "ok"
    errs = [ln for ln in res.log.splitlines() if "error" in ln] or res.log.splitlines() or ["?"]
    return "fails: " + errs[0][:120]


def samples(folder: Path, passes: Sequence[str] = SAMPLE_PASSES) -> dict[str, str]:
    """One sample per pass: the pass on the spec's kernel, a random feasible config (seed 0),
    built the way ``ktx run`` builds a candidate. ``ok``, ``no knob`` (the pass found no site),
    ``refused: ...`` (ktx's reason) or ``fails: ...`` (the build's first error): whether each
    rewrite of a real kernel is valid CUDA, before a GPU is involved."""
    from ktx.ir.errors import KtxError

    from ktx.pipeline import candidate_from_template, template_for_spec
    from ktx.specload import load_spec

    out: dict[str, str] = {}
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        spec = load_spec("ktx.toml")
        for name in passes:
            try:
                t = template_for_spec(spec, name)
                if not t.knobs:
                    out[name] = "no knob"
                    continue
                cand = candidate_from_template(spec, t, t.space.sample(0))
                out[name] = _compile_candidate(spec, cand)
            except KtxError as exc:
                out[name] = "refused: " + str(exc).splitlines()[0][:120]
            except Exception as exc:  # a crash is a result here, not the end of the check
                out[name] = (
                    f"crashed: {type(exc).__name__}: {str(exc).splitlines()[0][:100] if str(exc) else ''}"
                )
    finally:
        os.chdir(cwd)
    return out


def cached_draft(kernel: Mapping[str, Any], cache: Path, version: str) -> Drafted:
    """``ktx init``'s draft, cached on the kernel, its source file and the ktx version (drafting a
    large ggml file takes half a minute on a shared core)."""
    key = hashlib.sha256(
        json.dumps([version, kernel["id"], kernel["kernel"]]).encode() + source_path(kernel).read_bytes()
    ).hexdigest()[:24]
    hit = cache / "drafts" / f"{key}.json"
    if hit.exists():
        return Drafted(**{k: tuple(v) if k == "todos" else v for k, v in json.loads(hit.read_text()).items()})
    got = draft_kernel(kernel)
    if not got.crashed:
        hit.parent.mkdir(parents=True, exist_ok=True)
        hit.write_text(json.dumps(asdict(got)))
    return got


def one(kernel: Mapping[str, Any], build_too: bool, cache: Path, version: str) -> Row:
    got = cached_draft(kernel, cache, version)
    init = (
        f"{len(got.todos)} TODOs"
        if got.text
        else ("refused: " + got.refused if got.refused else "crashed: " + got.crashed)
    )
    folder = kernel_dir(kernel)
    spec, diff = folder / "ktx.toml", folder / "init.diff"
    base = dict(
        id=kernel["id"], project=kernel["project"], split=kernel["split"], kind=kernel["kind"], init=init
    )
    finished = spec.exists() and diff.exists()
    # a blocked kernel whose spec was finished anyway is measured like the others: its edit
    # counts, and --check and the build show where the block bites
    state = f"blocked: {kernel['blocked']}" if kernel.get("blocked") else "spec"
    if kernel.get("blocked") and not finished:
        return Row(**base, state=state)
    if not got.text and not spec.exists():
        return Row(**base, state=f"blocked: ktx init {'refuses' if got.refused else 'crashes'}")
    if not finished:
        return Row(**base, state="no spec yet")
    final, diff_text = spec.read_text(), diff.read_text()
    made = stat(diff_text)
    now_diff = unified(got.text, final, "draft") if got.text else None
    now = stat(now_diff) if now_diff is not None else None
    classes = edit_classes(now_diff, got.text, final).most_common() if now_diff is not None else []
    return Row(
        **base, state=state, edited=made.edited, silent=made.silent, silent_lines=made.silent_lines,
        edited_now=None if now is None else now.edited, silent_now=None if now is None else now.silent,
        draft_same=unapply(final, diff_text) == got.text, check=check(folder), classes_now=tuple(classes),
        ktx_build=ktx_build(folder) if build_too else "",
    )  # fmt: skip


def silent_kind(line: str) -> str:
    """What a silently wrong draft line was: the build flags (ktx does not know the project's
    include folders), the shape sets (often because a variable they need was a TODO elsewhere),
    the launch, or an argument's line."""
    key = line.split("=", 1)[0].strip()
    if key == "flags":
        return "compile flags"
    if key in ("default", "quick") or key.startswith("{"):
        return "shape sets"
    if key in ("grid", "block", "shared"):
        return "launch"
    return f"args ({key})" if key in ("shape", "dtype", "role", "value") else "other"


def table(rows: Sequence[Row]) -> list[str]:
    def n(v: int | None) -> str:
        return "-" if v is None else str(v)

    out = []
    for split in ("main", "heldout"):
        rs = [r for r in rows if r.split == split]
        specs = [r for r in rs if r.edited is not None]
        runnable = [r for r in specs if r.state == "spec"]
        edited = sum(r.edited or 0 for r in specs)
        drafted = [r for r in rs if r.init.endswith("TODOs")]
        out += [
            f"### {split} ({len(rs)} kernels, {len({r.project for r in rs})} projects)",
            "",
            f"drafted by `ktx init`: {len(drafted)}; finished specs: {len(specs)} "
            f"({len(runnable)} to run on the GPU, the rest blocked); blocked: "
            f"{sum(r.state.startswith('blocked') for r in rs)}; `--check` ready: "
            f"{sum(r.check.startswith('ready') for r in specs)} of {len(specs)}; ktx builds the original: "
            f"{sum(r.ktx_build == 'ok' for r in specs)} of {len(specs)}; originals that build (project "
            f"flags): {sum(r.build == 'ok' for r in rs)} of {sum(bool(r.build) for r in rs)}",
            "",
            f"edited lines {edited} ({edited / max(len(specs), 1):.1f} a spec; today's draft: "
            f"{sum(r.edited_now or 0 for r in specs)}), silently wrong {sum(r.silent or 0 for r in specs)} "
            f"(today's draft: {sum(r.silent_now or 0 for r in specs)})",
            "",
            "today's edited lines, median a spec: "
            + (
                f"{statistics.median(r.edited_now for r in specs if r.edited_now is not None)}"
                if any(r.edited_now is not None for r in specs)
                else "-"
            )
            + "; by what they say: "
            + (
                ", ".join(
                    f"{c} {n}"
                    for c, n in sum(
                        (collections.Counter(dict(r.classes_now)) for r in specs), collections.Counter()
                    ).most_common()
                )
                or "none"
            ),
            "",
            "silently wrong lines by what they were: "
            + (
                ", ".join(
                    f"{kind} {n}"
                    for kind, n in collections.Counter(
                        silent_kind(line) for r in specs for line in r.silent_lines
                    ).most_common()
                )
                or "none"
            ),
            "",
            "| kernel | project | kind | `ktx init` | state | edited | silently wrong "
            "| today: edited / silent | `--check` | ktx builds it | nvcc sm_90 (project flags) |",
            "| --- | --- | --- | --- | --- | ---: | ---: | ---: | --- | --- | --- |",
        ]
        for r in rs:
            today = (
                "-"
                if r.edited_now is None
                else f"{r.edited_now} / {r.silent_now}" + ("" if r.draft_same else " (draft changed)")
            )
            name = r.id.split("__", 1)[1]
            out.append(
                f"| {name} | {r.project} | {r.kind} | {r.init} | {r.state} | {n(r.edited)} | {n(r.silent)} "
                f"| {today} | {r.check or '-'} | {r.ktx_build or '-'} | {r.build or '-'} |"
            )
        out.append("")
        sampled = [r for r in rs if r.samples]
        if sampled:
            names = [p for p, _ in sampled[0].samples]
            short = {"ok": "ok", "no knob": "-"}
            out += [
                f"One sample per pass ({split}): the pass, a random feasible config (seed 0), built as "
                "`ktx run` builds it; `-`: no knob; the failures are listed below the table.",
                "",
                "| kernel | " + " | ".join(names) + " |",
                "| --- | " + " | ".join("---" for _ in names) + " |",
            ]
            notes = []
            for r in sampled:
                cells = []
                for p, res in r.samples:
                    if res in short:
                        cells.append(short[res])
                    else:
                        notes.append(f"- {r.id.split('__', 1)[1]}, {p}: {res}")
                        cells.append(res.split(":", 1)[0])
                out.append(f"| {r.id.split('__', 1)[1]} | " + " | ".join(cells) + " |")
            out += ["", *notes, ""]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--ids", nargs="*", default=[], help="kernel ids (default: all)")
    p.add_argument("--src", type=Path, default=SRC)
    p.add_argument("--no-build", action="store_true", help="skip the nvcc builds")
    p.add_argument("--cubin", action="store_true", help="build cubins (ptxas too), not PTX")
    p.add_argument(
        "--samples", action="store_true", help="also build one sample per pass of every spec that runs"
    )
    p.add_argument("--jobs", type=int, default=2, help="nvcc processes at once")
    p.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "ktx-realcode")
    p.add_argument("--out", type=Path, default=HERE, help="where cpu_table.md/.json go")
    args = p.parse_args(argv)
    manifest = load_manifest()
    if not args.src.is_dir():
        raise SystemExit(f"{args.src}: no sources (run benchmarks/realcode/fetch.py first)")
    kernels = selected(manifest, args.ids)
    rows = []
    version = ktx_version()
    for k in kernels:
        rows.append(one(k, not args.no_build, args.cache, version))
        print(f"{k['id']}: {rows[-1].init}; {rows[-1].state}", flush=True)
    if not args.no_build:
        pins = projects(manifest)
        cmds = [
            nvcc_command(k, pins[k["project"]].include, pins[k["project"]].defines, args.src, args.cubin)
            for k in kernels
        ]
        with ThreadPoolExecutor(args.jobs) as pool:
            builds = list(pool.map(lambda c: build(c, args.cache), cmds))
        rows = [Row(**{**asdict(r), "build": b}) for r, b in zip(rows, builds, strict=True)]
    if args.samples:
        rows = [
            replace(r, samples=tuple(samples(HERE / r.id).items())) if r.state == "spec" else r for r in rows
        ]
    from drafts import ktx_commit

    head = [
        f"# The real-code benchmark, CPU part (ktx {ktx_commit()})",
        "",
        "Regenerate: `python benchmarks/realcode/fetch.py && python benchmarks/realcode/cpu_check.py`. "
        "nvcc: " + ("cubin" if args.cubin else "PTX") + " for sm_90 of the original file.",
        "",
    ]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "cpu_table.md").write_text("\n".join(head + table(rows)))
    (args.out / "cpu_table.json").write_text(json.dumps([asdict(r) for r in rows], indent=1) + "\n")
    print((args.out / "cpu_table.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
