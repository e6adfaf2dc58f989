"""Measure every pass on a corpus of foreign kernels: applied, refused, silent, rolled back,
crashed, and whether each applied rewrite still compiles for sm_90 where the original does.

The corpus is described by ``results/corpus/manifest.json`` (rebuild it with
``scripts/corpus_fetch.py``); ``--folder DIR`` sweeps every ``*.cu`` of a folder instead (llm.c's
``dev/cuda``, as ``scripts/sweep_compile.py`` did). Each (kernel, pipeline) case runs ktx in
process, as ``ktx apply --knobs`` does, under a per-case time limit, and is classified by what
the pipeline's *last* pass did (so ``coarsen,vectorize`` counts vectorize after coarsen):

* **applied**: it exposed a knob (or rewrote a site);
* **refused**: it skipped a site with a reason, or ktx refused the kernel with an error;
* **silent**: no site and no refusal;
* **rolled back**: its edits did not reparse and were undone;
* **crashed**: any other exception (the traceback is kept), or the time limit.

Refusal reasons are grouped with line numbers, paths and quoted code stripped, so that they
aggregate. Where a rewrite applies, its widest feasible config is instantiated and compiled
(``nvcc -arch=sm_90 -ptx``, or ``--cubin``) with the project's include folders and the stub headers of
``scripts/corpus_stubs`` (torch, c10, pybind11); the original is compiled too (cached), and a
rewrite is judged only where its original builds.

    python scripts/sweep_corpus.py --out results/corpus/before        # main + held-out
    python scripts/sweep_corpus.py --folder ../shared/llmc/dev/cuda --no-compile --out /tmp/llmc
    python scripts/sweep_corpus.py --init --out results/corpus/init_before    # ktx init drafts

``--only PASS`` keeps the pipelines that end in PASS, ``--limit N`` the first N kernels,
``--split main|heldout`` one split, ``--jobs N`` parallel workers (ktx runs and nvcc).
"""

from __future__ import annotations

import argparse
import collections
import functools
import hashlib
import json
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus_fetch import find_kernels  # noqa: E402

STUBS = Path(__file__).resolve().parent / "corpus_stubs"
LLMC_STUBS = ROOT / "benchmarks" / "llmc" / "stubs"

#: The pipelines measured by default: each pass that exposes knobs on its own, and vectorize
#: after coarsen (a grid-stride loop that coarsen makes is what per-thread vectorize needs).
PIPELINES = (
    "vectorize",
    "coarsen,vectorize",
    "coarsen",
    "block-size",
    "row-owner",
    "cache-hints",
    "unroll",
    "split",
    "tile",
    "early-loads",
    "warp-reduce",
)
STATUSES = ("applied", "refused", "silent", "rolled back", "crashed")
NVCC_FLAGS = (
    "-std=c++17",
    "-arch=sm_90",
    "-x",
    "cu",
    "--expt-relaxed-constexpr",
    "--expt-extended-lambda",
    "-w",
    "-Xcicc",
    "-O0",
)


@dataclass(frozen=True)
class Source:
    """One file of the corpus and how to compile it."""

    project: str
    split: str
    file: str  # as the manifest names it (relative to the project root)
    path: str  # on this machine
    kernels: tuple[str, ...]
    includes: tuple[str, ...] = ()
    defines: tuple[str, ...] = ()


@dataclass(frozen=True)
class Case:
    """The result of one (kernel, pipeline) run."""

    project: str
    split: str
    file: str
    kernel: str
    pipeline: str
    status: str
    knobs: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()  # normalised, one per refused site
    raw: tuple[str, ...] = ()  # the messages as ktx printed them (first few)
    kernel_refused: bool = False  # ktx refused the kernel itself (an error), before any pass ran
    file_refused: bool = False  # ktx refused every kernel of the file (or the file did not parse)
    seconds: float = 0.0
    error: str = ""
    traceback: str = ""
    config: Mapping[str, int] = field(default_factory=dict)
    compile: str = ""  # "", "ok", "failed", "original fails", "not compiled"
    compile_error: str = ""


@dataclass(frozen=True)
class InitCase:
    """The result of ``ktx init --print`` on one kernel."""

    project: str
    split: str
    file: str
    kernel: str
    status: str  # drafted | refused | crashed
    todos: int = 0
    todo_lines: tuple[str, ...] = ()
    check: tuple[str, ...] = ()  # what ``ktx init --check`` says blocks a run
    reason: str = ""
    raw: str = ""
    seconds: float = 0.0
    traceback: str = ""
    draft: str = ""


class CaseTimeout(BaseException):
    """Raised by the alarm; a BaseException so that ktx's ``except Exception`` cannot eat it."""


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise CaseTimeout()


# -- the corpus -----------------------------------------------------------------------------------


def load_manifest(manifest: Path, corpus: Path, split: str) -> list[Source]:
    data = json.loads(manifest.read_text())
    projects = {p["project"]: p for p in data["projects"]}
    out: list[Source] = []
    for f in data["files"]:
        if split != "all" and f["split"] != split:
            continue
        proj = projects[f["project"]]
        root = corpus / f["project"]
        includes = tuple(str(root / d) for d in proj.get("include", ()))
        out.append(
            Source(
                f["project"],
                f["split"],
                f["file"],
                str(root / f["file"]),
                tuple(f["kernels"]),
                includes,
                tuple(proj.get("defines", ())),
            )
        )
    return out


def load_folder(folder: Path, project: str) -> list[Source]:
    out: list[Source] = []
    includes = tuple(str(d) for d in (folder, LLMC_STUBS) if d.exists())
    for cu in sorted(folder.glob("*.cu")):
        kernels = tuple(find_kernels(cu.read_text(errors="replace")))
        if kernels:
            out.append(Source(project, "main", cu.name, str(cu), kernels, includes))
    return out


def limit_kernels(sources: list[Source], limit: int | None) -> list[Source]:
    if limit is None:
        return sources
    out: list[Source] = []
    left = limit
    for s in sources:
        if left <= 0:
            break
        out.append(replace(s, kernels=s.kernels[:left]))
        left -= len(out[-1].kernels)
    return out


# -- classifying ------------------------------------------------------------------------------------

_BACKTICK = re.compile(r"`[^`]*`")
_QUOTED = re.compile(r"'[^'\n]{1,80}'")
_LINE = re.compile(r"\b(lines?|line)\s+\d+(\s*(-|–|and|,)\s*\d+)*")
_FILE_LINE = re.compile(r"[\w./+-]+\.(cuh|cu|hpp|h|toml)\b(:\d+)?(:\d+)?")
_NUMBER_COLON = re.compile(r":\d+\b")


def normalise(reason: str, kernel: str = "") -> str:
    """A refusal with what varies per site taken out (line numbers, paths, quoted code, the
    kernel's name), so that the same reason from different kernels aggregates."""
    r = _FILE_LINE.sub("<file>", reason)
    r = _BACKTICK.sub("`…`", r)
    r = _QUOTED.sub("'…'", r)
    r = _LINE.sub(r"\1 N", r)
    r = _NUMBER_COLON.sub(":N", r)
    if kernel:
        r = re.sub(rf"\b{re.escape(kernel)}\b", "<kernel>", r)
    return " ".join(r.split())[:240]


def focus_pass(pipeline: str) -> str:
    """The pass a pipeline is measured for: its last element, options dropped."""
    from ktx.pipeline import parse_pipeline

    return parse_pipeline(pipeline)[-1].name


def classify(
    template: Any, focus: str, kernel: str
) -> tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(status, knobs, normalised reasons, raw messages) of the focus pass in a Template."""
    from ktx.passbase import Rewritten, RolledBack, Skipped

    mine = [o for o in template.outcomes if o.pass_name == focus]
    knobs = tuple(k.name for k in template.knobs if k.pass_name == focus)
    rewritten = [o for o in mine if isinstance(o, Rewritten)]
    rolled = [o for o in mine if isinstance(o, RolledBack)]
    skipped = [o for o in mine if isinstance(o, Skipped)]
    # ``site:line`` as ``ktx apply`` prints it (line 0: the remark names no line)
    raw = tuple(f"{o.site}:{o.line}: {o.message}" for o in (rolled or skipped))[:6]
    if knobs or rewritten:
        return "applied", knobs or tuple(n for o in rewritten for n in o.knobs), (), raw
    if rolled:
        return "rolled back", (), tuple(normalise(o.message, kernel) for o in rolled), raw
    if skipped:
        return "refused", (), tuple(normalise(o.message, kernel) for o in skipped), raw
    return "silent", (), (), ()


def widest_config(template: Any) -> dict[str, int]:
    """The largest value of every knob where that is feasible, else a feasible sample, else
    the defaults: the config most likely to show a rewrite that does not build."""
    space = template.space
    config = {k.name: max(k.values) for k in space.knobs}
    if not space.violations(config, {}):
        return config
    try:
        return dict(space.sample(0))
    except Exception:
        return dict(space.defaults())


# -- one file: every kernel x pipeline, in a worker process ------------------------------------------


@dataclass(frozen=True)
class Job:
    source: Source
    pipelines: tuple[str, ...]
    timeout: float
    work: str  # where instantiated rewrites are written
    compile: bool


def _timed(seconds: float) -> None:
    signal.setitimer(signal.ITIMER_REAL, seconds)


def sweep_file(job: Job) -> list[Case]:
    """Run every (kernel, pipeline) of one file; a rewrite to compile is written under job.work
    and named in ``Case.error`` (as ``instance:<path>``) for the compile phase."""
    from ktx.ir import parse
    from ktx.ir.errors import KtxError

    from ktx.pipeline import run

    signal.signal(signal.SIGALRM, _alarm)
    src = job.source
    base = Case(src.project, src.split, src.file, "", "", "")
    data = Path(src.path).read_bytes()  # bytes: a file that is not UTF-8 is refused, as by ktx apply
    cases: list[Case] = []
    t0 = time.monotonic()
    try:
        _timed(job.timeout * 4)
        module = parse(data, src.path)
    except (KtxError, CaseTimeout) as exc:
        why = "the file does not parse in the time limit" if isinstance(exc, CaseTimeout) else str(exc)
        for k in src.kernels:
            for p in job.pipelines:
                cases.append(
                    replace(
                        base,
                        kernel=k,
                        pipeline=p,
                        status="refused",
                        file_refused=True,
                        reasons=(normalise(why, k),),
                        raw=(why[:300],),
                    )
                )
        return cases
    except Exception as exc:
        tb = traceback.format_exc()
        for k in src.kernels:
            for p in job.pipelines:
                cases.append(replace(base, kernel=k, pipeline=p, status="crashed", file_refused=True,
                                     error=f"{type(exc).__name__}: {exc}"[:300], traceback=tb))  # fmt: skip
        return cases
    finally:
        _timed(0)
    parse_s = time.monotonic() - t0
    for kernel in src.kernels:
        for pipeline in job.pipelines:
            case = replace(base, kernel=kernel, pipeline=pipeline)
            t0 = time.monotonic()
            try:
                _timed(job.timeout)
                template = run(module, pipeline, kernel=kernel, path=src.path)
                status, knobs, reasons, raw = classify(template, focus_pass(pipeline), kernel)
                case = replace(case, status=status, knobs=knobs, reasons=reasons, raw=raw)
                if status == "applied" and job.compile:
                    config = widest_config(template)
                    instance = template.instantiate(config)
                    digest = hashlib.sha256(instance.encode()).hexdigest()[:16]
                    out = Path(job.work) / f"{digest}{Path(src.path).suffix}"
                    out.write_text(instance)
                    case = replace(case, config=config, error=f"instance:{out}")
            except CaseTimeout:
                case = replace(case, status="crashed", error=f"timed out after {job.timeout:g} s")
            except KtxError as exc:
                msg = str(exc)
                case = replace(
                    case,
                    status="refused",
                    kernel_refused=True,
                    reasons=(normalise(msg, kernel),),
                    raw=(msg[:300],),
                )
            except Exception as exc:
                case = replace(case, status="crashed", error=f"{type(exc).__name__}: {exc}"[:300],
                               traceback=traceback.format_exc())  # fmt: skip
            finally:
                _timed(0)
            cases.append(replace(case, seconds=round(time.monotonic() - t0 + parse_s / len(src.kernels), 3)))
    if cases and all(c.kernel_refused for c in cases):
        cases = [replace(c, file_refused=True) for c in cases]
    return cases


def init_file(job: Job) -> list[InitCase]:
    """``ktx init --print`` (and ``--check`` on the drafted folder) for every kernel of a file."""
    from ktx.ir.errors import KtxError

    from ktx.draft import check, draft

    signal.signal(signal.SIGALRM, _alarm)
    src = job.source
    out: list[InitCase] = []
    for kernel in src.kernels:
        case = InitCase(src.project, src.split, src.file, kernel, "")
        t0 = time.monotonic()
        try:
            _timed(job.timeout)
            with tempfile.TemporaryDirectory(prefix="ktx-init-") as tmp:
                d = draft(src.path, kernel, tmp)
                todo_lines = tuple(
                    ln.strip() for ln in d.text.splitlines() if ln.lstrip().startswith("# TODO")
                )
                (Path(tmp) / "ktx.toml").write_text(d.text)
                try:
                    blockers = tuple(normalise(b.message, kernel) for b in check(tmp))
                except KtxError as exc:
                    blockers = (normalise(str(exc), kernel),)
            case = replace(case, status="drafted", todos=len(todo_lines), todo_lines=todo_lines,
                           check=blockers, draft=d.text)  # fmt: skip
        except CaseTimeout:
            case = replace(case, status="crashed", reason=f"timed out after {job.timeout:g} s")
        except KtxError as exc:
            case = replace(case, status="refused", reason=normalise(str(exc), kernel), raw=str(exc)[:300])
        except Exception as exc:
            case = replace(case, status="crashed", reason=f"{type(exc).__name__}: {exc}"[:300],
                           traceback=traceback.format_exc())  # fmt: skip
        finally:
            _timed(0)
        out.append(replace(case, seconds=round(time.monotonic() - t0, 3)))
    return out


# -- compiling ---------------------------------------------------------------------------------------


#: ``-ptx`` (front end and code generation, no ptxas) by default, and ``-Xcicc -O0`` above:
#: the sweep asks whether a rewrite is valid CUDA, and optimising and ptxas triple the time of
#: a heavily templated file (causal-conv1d's backward took over 10 minutes) on two shared
#: cores; ``--cubin`` runs ptxas too.
OUTPUT_FLAG = ["-ptx"]


def nvcc_command(path: Path, src: Source, beside: Path | None = None) -> list[str]:
    """nvcc for ``path``; ``beside``: the original's folder, when the rewrite could not be
    written next to it (a read-only corpus), so that its quoted includes still resolve."""
    includes = [
        str(path.parent),
        *([str(beside)] if beside is not None else []),
        *src.includes,
        str(STUBS),
        *([str(LLMC_STUBS)] if LLMC_STUBS.exists() else []),
    ]
    cmd = ["nvcc", *NVCC_FLAGS, *OUTPUT_FLAG, "-o", os.devnull, str(path)]
    cmd += [f"-I{d}" for d in includes] + [f"-D{d}" for d in src.defines]
    return cmd


@functools.cache
def stubs_digest() -> str:
    """A hash of the stub headers, part of every cache key: a stub fixed is a stub recompiled."""
    h = hashlib.sha256()
    for f in sorted(STUBS.rglob("*")):
        if f.is_file():
            h.update(f.relative_to(STUBS).as_posix().encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def compile_cached(
    path: Path, src: Source, cache: Path, text: str, beside: Path | None = None
) -> tuple[int, str]:
    """nvcc's exit code and first error lines for ``path`` (whose content is ``text``), cached
    by content, flags and include folders (the headers are those of a pinned commit)."""
    cmd = nvcc_command(path, src, beside)
    key_cmd = [c.replace(str(path), "<file>") for c in cmd]
    key = hashlib.sha256(("\0".join(key_cmd) + "\0" + stubs_digest() + "\0" + text).encode()).hexdigest()
    hit = cache / f"{key}.json"
    if hit.exists():
        data = json.loads(hit.read_text())
        return int(data["rc"]), str(data["err"])
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        rc, err = r.returncode, _errors(r.stdout + r.stderr)
    except subprocess.TimeoutExpired:
        rc, err = 124, "nvcc timed out"
    cache.mkdir(parents=True, exist_ok=True)
    hit.write_text(json.dumps({"rc": rc, "err": err}))
    return rc, err


def _errors(output: str) -> str:
    lines = [ln for ln in output.splitlines() if "error" in ln.lower()]
    return "\n".join(lines[:6])[:800]


def compile_phase(
    cases: list[Case], sources: Mapping[tuple[str, str], Source], cache: Path, jobs: int
) -> list[Case]:
    """Compile every original that has an applied rewrite, then the rewrites, each next to its
    original (so that quoted includes resolve alike), and fill in ``Case.compile``."""
    pending = [c for c in cases if c.error.startswith("instance:")]
    originals = sorted({(c.project, c.file) for c in pending})

    def build_original(key: tuple[str, str]) -> tuple[int, str]:
        src = sources[key]
        path = Path(src.path)
        return compile_cached(path, src, cache, path.read_text(errors="replace"))

    def build_rewrite(c: Case) -> tuple[int, str]:
        src = sources[(c.project, c.file)]
        instance = Path(c.error.removeprefix("instance:"))
        orig = Path(src.path)
        beside = orig.with_name(f"{orig.stem}.ktx-{instance.stem}{orig.suffix}")
        text = instance.read_text()
        try:
            beside.write_text(text)
        except OSError:  # a read-only corpus (CI's shared/): compile where it was written
            return compile_cached(instance, src, cache, text, orig.parent)
        try:
            return compile_cached(beside, src, cache, text)
        finally:
            beside.unlink(missing_ok=True)

    with ThreadPoolExecutor(max(1, jobs)) as ex:
        base = dict(zip(originals, ex.map(build_original, originals), strict=True))
        todo = [c for c in pending if base[(c.project, c.file)][0] == 0]
        built = dict(zip([id(c) for c in todo], ex.map(build_rewrite, todo), strict=True))
    out: list[Case] = []
    for c in cases:
        if not c.error.startswith("instance:"):
            out.append(c)
            continue
        rc0, err0 = base[(c.project, c.file)]
        if rc0 != 0:
            out.append(replace(c, error="", compile="original fails", compile_error=err0))
            continue
        rc, err = built[id(c)]
        out.append(replace(c, error="", compile="ok" if rc == 0 else "failed", compile_error=err))
    return out


# -- reporting ---------------------------------------------------------------------------------------


def table(cases: Sequence[Case], pipelines: Sequence[str], title: str) -> list[str]:
    kernels = {(c.project, c.file, c.kernel) for c in cases}
    files = {(c.project, c.file) for c in cases}
    refused_whole = {(c.project, c.file) for c in cases if c.file_refused}
    lines = [
        f"### {title}",
        "",
        f"{len(kernels)} kernels in {len(files)} files of {len({c.project for c in cases})} projects; "
        f"{len(cases)} runs; {sum(c.status == 'crashed' for c in cases)} crashed; "
        f"{len(refused_whole)} files refused whole.",
        "",
        "| pipeline | applied | refused | silent | rolled back | crashed | compile ok | compile failed "
        "| original fails |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for p in pipelines:
        mine = [c for c in cases if c.pipeline == p]
        if not mine:
            continue
        n = collections.Counter(c.status for c in mine)
        cc = collections.Counter(c.compile for c in mine)
        pct = f" ({100 * n['applied'] / len(mine):.0f}%)"
        cells = [f"{n['applied']}{pct}", *(str(n[s]) for s in STATUSES[1:])]
        cells += [str(cc["ok"]), str(cc["failed"]), str(cc["original fails"])]
        lines.append(f"| {p} | " + " | ".join(cells) + " |")
    lines += ["", "Top refusals (kernels refused for that reason, per pipeline):", ""]
    lines += ["| count | pipeline | refusal |", "|---:|---|---|"]
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    for c in cases:
        for r in set(c.reasons):
            counts[(c.pipeline, r)] += 1
    for (p, r), k in counts.most_common(25):
        lines.append(f"| {k} | {p} | {r.replace('|', '/')} |")
    crashed = [c for c in cases if c.status == "crashed"]
    if crashed:
        lines += ["", "Crashes:", ""]
        lines += [f"- {c.project}/{c.file} `{c.kernel}` [{c.pipeline}]: {c.error}" for c in crashed[:30]]
    failed = [c for c in cases if c.compile == "failed"]
    if failed:
        lines += ["", "Rewrites that do not build where the original does:", ""]
        for c in failed[:40]:
            first = c.compile_error.splitlines()[0] if c.compile_error else "?"
            lines.append(
                f"- {c.project}/{c.file} `{c.kernel}` [{c.pipeline}] {dict(c.config)}: {normalise(first)}"
            )
    if refused_whole:
        lines += ["", "Files refused whole:", ""]
        for proj, f in sorted(refused_whole):
            raw = next(c.raw[0] for c in cases if (c.project, c.file) == (proj, f) and c.raw) if any(
                c.raw for c in cases if (c.project, c.file) == (proj, f)) else ""  # fmt: skip
            lines.append(f"- {proj}/{f}: {raw[:200]}")
    return [*lines, ""]


def per_project(cases: Sequence[Case], pipelines: Sequence[str]) -> list[str]:
    projects = sorted({c.project for c in cases})
    lines = ["| pipeline | " + " | ".join(projects) + " |", "|---|" + "---:|" * len(projects)]
    for p in pipelines:
        cells = []
        for proj in projects:
            mine = [c for c in cases if c.pipeline == p and c.project == proj]
            cells.append(f"{sum(c.status == 'applied' for c in mine)}/{len(mine)}" if mine else "-")
        lines.append(f"| {p} | " + " | ".join(cells) + " |")
    return ["Applied per project (kernels where the pass exposed a knob / kernels):", "", *lines, ""]


def init_table(cases: Sequence[InitCase], title: str) -> list[str]:
    n = collections.Counter(c.status for c in cases)
    drafted = [c for c in cases if c.status == "drafted"]
    todos = [c.todos for c in drafted]
    ready = [c for c in drafted if not c.check]
    lines = [
        f"### {title}",
        "",
        "| kernels | drafted | refused | crashed | TODOs (total) | TODOs per draft (mean / max) "
        "| drafts with 0 TODO | `--check` says ready |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
        f"| {len(cases)} | {n['drafted']} | {n['refused']} | {n['crashed']} | {sum(todos)} | "
        f"{(sum(todos) / len(todos)) if todos else 0:.1f} / {max(todos) if todos else 0} | "
        f"{sum(t == 0 for t in todos)} | {len(ready)} |",
        "",
        "Why `ktx init` refused a kernel:",
        "",
        "| count | refusal |",
        "|---:|---|",
    ]
    for r, k in collections.Counter(c.reason for c in cases if c.status == "refused").most_common(15):
        lines.append(f"| {k} | {r.replace('|', '/')} |")
    lines += ["", "What the TODOs ask for (normalised):", "", "| count | TODO |", "|---:|---|"]
    tcount: collections.Counter[str] = collections.Counter()
    for c in drafted:
        for t in c.todo_lines:
            what = re.sub(r"\bof \w+", "of <name>", t.split("TODO", 1)[1].lstrip(": "))
            what = re.sub(r"indexed as .+ \(looked", "indexed as … (looked", what)
            tcount[normalise(what, c.kernel)[:140]] += 1
    for t, k in tcount.most_common(15):
        lines.append(f"| {k} | {t.replace('|', '/')} |")
    crashed = [c for c in cases if c.status == "crashed"]
    if crashed:
        lines += ["", "Crashes:", ""] + [
            f"- {c.project}/{c.file} `{c.kernel}`: {c.reason}" for c in crashed[:20]
        ]
    return [*lines, ""]


def ktx_commit() -> str:
    import ktx

    where = Path(ktx.__file__).resolve().parent.parent
    try:
        r = subprocess.run(
            ["git", "-C", str(where), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        )
        status = ["git", "-C", str(where), "status", "--porcelain", "--", "ktx", "ir", "passes"]
        dirty = subprocess.run(status, capture_output=True, text=True).stdout.strip()
        return r.stdout.strip() + ("+dirty" if dirty else "")
    except OSError:
        return "unknown"


# -- main ------------------------------------------------------------------------------------------


def _files(
    sources: Sequence[Source], pipelines: Sequence[str], timeout: float, work: str, compile: bool
) -> Iterator[Job]:
    # Big files first, so that the pool does not end on one long file.
    for s in sorted(sources, key=lambda s: -os.path.getsize(s.path) * len(s.kernels)):
        yield Job(s, tuple(pipelines), timeout, work, compile)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--manifest", type=Path, default=ROOT / "results" / "corpus" / "manifest.json")
    p.add_argument(
        "--corpus", type=Path, default=Path("/work/corpus"), help="where corpus_fetch.py put the sources"
    )
    p.add_argument("--folder", type=Path, help="sweep every *.cu of this folder instead of the manifest")
    p.add_argument("--split", choices=("main", "heldout", "all"), default="all")
    p.add_argument(
        "--pipeline", action="append", help="a pipeline to measure (repeatable; default: the usual 11)"
    )
    p.add_argument("--only", action="append", help="keep the pipelines whose last pass is PASS (repeatable)")
    p.add_argument("--limit", type=int, help="the first N kernels only")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per (kernel, pipeline) case")
    p.add_argument("--jobs", type=int, default=2, help="worker processes for ktx and for nvcc")
    p.add_argument("--no-compile", action="store_true", help="skip the sm_90 compile check")
    p.add_argument(
        "--cache", type=Path, default=Path.home() / ".cache" / "ktx-sweep", help="nvcc results cache"
    )
    p.add_argument(
        "--init", action="store_true", help="run `ktx init --print` per kernel instead of the passes"
    )
    p.add_argument("--cubin", action="store_true", help="compile to a cubin (runs ptxas too) instead of PTX")
    p.add_argument(
        "--originals", action="store_true", help="only compile every original and list those that fail"
    )
    p.add_argument(
        "--ktx-root", type=Path, help="measure the ktx of this checkout (e.g. a worktree of an old commit)"
    )
    p.add_argument("--out", type=Path, help="write OUT.json and OUT.md")
    args = p.parse_args(argv)
    if args.ktx_root and os.environ.get("KTX_SWEEP_ROOT") != str(args.ktx_root.resolve()):
        _reexec_with(args.ktx_root.resolve(), sys.argv if argv is None else [sys.argv[0], *argv])
    if args.cubin:
        OUTPUT_FLAG[:] = ["-cubin"]

    if args.folder:
        sources = load_folder(args.folder, args.folder.name)
    else:
        if not args.manifest.exists():
            p.error(f"{args.manifest}: no manifest; run scripts/corpus_fetch.py --select")
        sources = load_manifest(args.manifest, args.corpus, args.split)
        missing = [s.path for s in sources if not Path(s.path).exists()]
        if missing:
            p.error(f"{missing[0]} (and {len(missing) - 1} more) missing: run scripts/corpus_fetch.py")
    sources = limit_kernels(sources, args.limit)
    if args.originals:
        return check_originals(sources, args.cache, args.jobs)
    pipelines = list(args.pipeline or PIPELINES)
    if args.only:
        pipelines = [pl for pl in pipelines if focus_pass(pl) in set(args.only)]
    commit = ktx_commit()
    started = time.time()
    work = tempfile.mkdtemp(prefix="ktx-sweep-")
    ctx = multiprocessing.get_context("fork")
    jobs = list(_files(sources, pipelines, args.timeout, work, not args.no_compile))
    header: dict[str, Any] = {
        "ktx": commit,
        "manifest": str(args.manifest) if not args.folder else None,
        "folder": str(args.folder) if args.folder else None,
        "pipelines": pipelines,
        "compile": not args.no_compile and not args.init,
        "nvcc_flags": list(NVCC_FLAGS),
    }
    with ctx.Pool(max(1, args.jobs), maxtasksperchild=8) as pool:
        if args.init:
            inits = [c for batch in pool.imap_unordered(init_file, jobs) for c in batch]
            return _report_init(args, header, inits, started)
        cases = [c for batch in pool.imap_unordered(sweep_file, jobs) for c in batch]
    if not args.no_compile:
        by_key = {(s.project, s.file): s for s in sources}
        cases = compile_phase(cases, by_key, args.cache, args.jobs)
    order = {pl: i for i, pl in enumerate(pipelines)}
    cases.sort(key=lambda c: (c.split, c.project, c.file, c.kernel, order[c.pipeline]))
    md = [f"# Corpus sweep (ktx {commit})", ""]
    md += [f"Pipelines: {', '.join(pipelines)}. Compile check: {'on' if header['compile'] else 'off'}.", ""]
    for split in ("main", "heldout"):
        mine = [c for c in cases if c.split == split]
        if mine:
            md += table(mine, pipelines, f"{split} corpus") + per_project(mine, pipelines)
    header["seconds"] = round(time.time() - started, 1)
    _write(args.out, {**header, "cases": [asdict(c) for c in cases]}, md)
    crashed = sum(c.status == "crashed" for c in cases)
    whole = len({(c.project, c.file) for c in cases if c.file_refused})
    failed = sum(c.compile == "failed" for c in cases)
    print(f"{len(cases)} runs: " + ", ".join(f"{s} {sum(c.status == s for c in cases)}" for s in STATUSES)
          + f"; files refused whole {whole}; rewrites that do not build {failed}")  # fmt: skip
    return 1 if crashed or whole else 0


def check_originals(sources: Sequence[Source], cache: Path, jobs: int) -> int:
    """Compile every original file (the stub headers' own test): print those that fail."""

    def build(s: Source) -> tuple[int, str]:
        path = Path(s.path)
        return compile_cached(path, s, cache, path.read_text(errors="replace"))

    with ThreadPoolExecutor(max(1, jobs)) as ex:
        results = list(ex.map(build, sources))
    for s, (rc, err) in zip(sources, results, strict=True):
        if rc:
            print(f"FAIL {s.project}/{s.file}\n  " + err.replace("\n", "\n  "))
    ok = sum(rc == 0 for rc, _ in results)
    print(f"{ok}/{len(sources)} originals build")
    return 0


def _reexec_with(root: Path, argv: list[str]) -> None:
    """Run this script again with ``root``'s ktx first on the path, laid out as installed
    (``ktx/ir`` and ``ktx/passes`` are the top-level ``ir/`` and ``passes/`` folders)."""
    layout = Path(tempfile.mkdtemp(prefix="ktx-root-"))
    pkg = layout / "ktx"
    pkg.mkdir()
    for entry in (root / "ktx").iterdir():
        if entry.name != "__pycache__":
            (pkg / entry.name).symlink_to(entry)
    (pkg / "ir").symlink_to(root / "ir")
    (pkg / "passes").symlink_to(root / "passes")
    env = {**os.environ, "KTX_SWEEP_ROOT": str(root)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(layout), env.get("PYTHONPATH", "")]))
    os.execve(sys.executable, [sys.executable, *argv], env)


def _report_init(
    args: argparse.Namespace, header: dict[str, Any], cases: list[InitCase], started: float
) -> int:
    cases.sort(key=lambda c: (c.split, c.project, c.file, c.kernel))
    md = [f"# `ktx init` on the corpus (ktx {header['ktx']})", ""]
    for split in ("main", "heldout"):
        mine = [c for c in cases if c.split == split]
        if mine:
            md += init_table(mine, f"{split} corpus")
    header["seconds"] = round(time.time() - started, 1)
    _write(args.out, {**header, "mode": "init", "cases": [asdict(c) for c in cases]}, md)
    n = collections.Counter(c.status for c in cases)
    print(f"{len(cases)} kernels: drafted {n['drafted']}, refused {n['refused']}, crashed {n['crashed']}; "
          f"TODO lines {sum(c.todos for c in cases)}")  # fmt: skip
    return 1 if n["crashed"] else 0


def _write(out: Path | None, data: dict[str, Any], md: list[str]) -> None:
    text = "\n".join(md)
    if out is None:
        print(text)
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(data, indent=1) + "\n")
    out.with_suffix(".md").write_text(text)
    print(f"wrote {out.with_suffix('.md')} and {out.with_suffix('.json')}")


if __name__ == "__main__":
    sys.exit(main())
