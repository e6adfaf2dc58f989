"""Sampled configs of every built-in pass compile with nvcc, and their resources are recorded.

For each pass and each suite kernel where it exposes knobs, ``KTX_COMPILE_SAMPLES`` (default 1)
random feasible configs other than the default are instantiated; so is one sampled config of a
pipeline that edits both the kernel and its launcher. nvcc costs about two seconds a translation
unit here, mostly fixed costs, so the instantiations of one kernel are compiled together: each
goes in its own namespace (``ktx_s<i>``, includes hoisted) of one file built with
``nvcc -std=c++17 -arch=sm_90 -c -Xptxas -v``, host code included. A failing unit is compiled
again one instantiation at a time, to name the culprit. ``ptxas -v`` registers, spills and shared
memory per instantiation go to ``.ktx/passes-compile.json``. Units are compiled in a thread pool
and cached by source hash under ``.ktx/compile-cache``, so reruns cost nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from passtest import ROOT, SUITE

from ktx.pipeline import run
from ktx.registry import default_registry
from ktx.template import Template

NVCC = shutil.which("nvcc")
SAMPLES = int(os.environ.get("KTX_COMPILE_SAMPLES", "1"))
FLAGS = ("-std=c++17", "-arch=sm_90", "-Xptxas", "-v")
CACHE = ROOT / ".ktx" / "compile-cache"
RECORD = ROOT / ".ktx" / "passes-compile.json"
pytestmark = pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH")


@dataclass(frozen=True)
class Job:
    kernel: str
    pipeline: str
    config: dict[str, int]
    source: str


def _configs(t: Template, count: int) -> list[dict[str, int]]:
    """Up to ``count`` distinct feasible configs that differ from the default (seeded draws)."""
    default = t.space.defaults()
    found: list[dict[str, int]] = []
    for seed in range(200):
        config = t.space.sample(seed)
        if config != default and config not in found:
            found.append(config)
        if len(found) == count:
            break
    return found or [default]


def _jobs(path: Path) -> list[Job]:
    text = path.read_text()
    name = path.parent.name
    jobs: list[Job] = []
    for cls in default_registry():
        t = run(text, cls.name, path=str(path))
        if t.knobs:
            jobs += [Job(name, cls.name, c, t.instantiate(c)) for c in _configs(t, SAMPLES)]
    mapping = "split" if run(text, "split", path=str(path)).knobs else "coarsen"
    pipeline = f"expose,block-size,launch-bounds,{mapping},tile,unroll"
    t = run(text, pipeline, path=str(path))
    jobs += [Job(name, pipeline, c, t.instantiate(c)) for c in _configs(t, 1)]
    return jobs


_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include[^\n]*\n", re.M)


def _unit(sources: list[str]) -> str:
    """One translation unit holding each source in namespace ``ktx_s<i>``, includes hoisted."""
    includes = sorted({m.group(0) for src in sources for m in _INCLUDE.finditer(src)})
    parts = ["".join(includes)]
    parts += [
        f"namespace ktx_s{i} {{\n{_INCLUDE.sub('', src)}\n}}  // namespace ktx_s{i}\n"
        for i, src in enumerate(sources)
    ]
    return "".join(parts)


def _nvcc(source: str) -> tuple[int, str]:
    assert NVCC is not None
    key = hashlib.sha256(f"{FLAGS} {NVCC}\n{source}".encode()).hexdigest()[:24]
    cached = CACHE / f"{key}.log"
    if cached.exists():
        return 0, cached.read_text()
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "unit.cu"
        src.write_text(source)
        proc = subprocess.run(
            [NVCC, *FLAGS, "-c", str(src), "-o", str(Path(tmp) / "unit.o")],
            capture_output=True,
            text=True,
            timeout=600,
        )
    log = proc.stdout + proc.stderr
    if proc.returncode == 0:
        CACHE.mkdir(parents=True, exist_ok=True)
        cached.write_text(log)
    return proc.returncode, log


def _resources(log: str) -> dict[int, dict[str, int]]:
    """ptxas -v figures per namespace index (the first kernel entry of each)."""
    found: dict[int, dict[str, int]] = {}
    current: int | None = None
    for line in log.splitlines():
        entry = re.search(r"(?:Compiling entry function|Function properties for) '?_ZN(\d+)ktx_s", line)
        if entry:
            # Mangled names spell the namespace's length first: _ZN6ktx_s4 is ktx_s4.
            start = entry.end() - len("ktx_s")
            current = int(line[start : start + int(entry.group(1))][len("ktx_s") :])
            continue
        if current is None:
            continue
        spills = re.search(r"(\d+) bytes spill stores", line)
        if spills:
            found.setdefault(current, {})["spill_stores"] = int(spills.group(1))
        used = re.search(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?", line)
        if used:
            row = found.setdefault(current, {})
            row.setdefault("registers", int(used.group(1)))
            row.setdefault("smem", int(used.group(2) or 0))
    return found


def _check_kernel(jobs: list[Job]) -> list[dict[str, object]]:
    rc, log = _nvcc(_unit([j.source for j in jobs]))
    if rc == 0:
        res = _resources(log)
        return [
            {"kernel": j.kernel, "pipeline": j.pipeline, "config": j.config, "ok": True, **res.get(i, {})}
            for i, j in enumerate(jobs)
        ]
    rows: list[dict[str, object]] = []
    for j in jobs:
        one_rc, one_log = _nvcc(_unit([j.source]))
        row: dict[str, object] = {"kernel": j.kernel, "pipeline": j.pipeline, "config": j.config}
        row.update({"ok": one_rc == 0, **_resources(one_log).get(0, {})})
        if one_rc:
            row["log"] = one_log[-2000:]
        rows.append(row)
    return rows


@pytest.mark.slow
def test_sampled_configs_compile(record_property: pytest.RecordProperty) -> None:
    per_kernel = [_jobs(path) for path in SUITE]
    assert sum(len(jobs) for jobs in per_kernel) >= 30
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        rows = [row for chunk in pool.map(_check_kernel, per_kernel) for row in chunk]
    RECORD.parent.mkdir(parents=True, exist_ok=True)
    RECORD.write_text(json.dumps(rows, indent=1) + "\n")
    failed = [r for r in rows if not r["ok"]]
    record_property("compiled", f"{len(rows) - len(failed)}/{len(rows)}")
    assert not failed, "\n\n".join(
        f"{r['kernel']} {r['pipeline']} {r['config']}:\n{r.get('log')}" for r in failed
    )
    assert all("registers" in r for r in rows), "ptxas -v reported each instantiation's resources"
