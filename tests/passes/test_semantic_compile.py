"""Every config of the semantic passes compiles with nvcc, on every kernel where a pass applies.

Small spaces are compiled whole (vectorize, fast-math, warp-reduce, rows-per-block); the
cache-hints space (up to 4^3 * 2^2 configs) is covered by each knob value alone, all knobs at
their largest value, and seeded random fill-ins (see :func:`semantic.configs`). Combined
pipelines and the golden inputs get sampled configs too. The instantiations of one kernel are
compiled as one translation unit (see ``test_compile.py``, whose helpers and cache this uses);
the figures go to ``.ktx/semantic-compile.json``.
"""

from __future__ import annotations

import json
import os
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from ktx.ir import parse
from passtest import ROOT
from semantic import APPLIES, build, configs, load
from test_compile import NVCC, Job, _check_kernel

from ktx.pipeline import run

RECORD = ROOT / ".ktx" / "semantic-compile.json"
LIMIT = int(os.environ.get("KTX_SEMANTIC_LIMIT", "24"))
COMBINED = {
    "act_and_mul_scalar": "vectorize,block-size,cache-hints,fast-math",
    "moe_sum_scalar": "vectorize,rows-per-block,cache-hints",
    "scaled_add": "hoist,vectorize,cache-hints,fast-math",
    "tree_sum": "vectorize,warp-reduce,cache-hints",
    "silu_and_mul": "block-size,rows-per-block,cache-hints,fast-math",
    "merge_attn_states": "block-size,cache-hints,fast-math",
    "fused_add_rmsnorm": "block-size,cache-hints,fast-math",
}
GOLDEN = ("vectorize", "fast_math", "warp_reduce", "hoist", "cache_hints", "rows_per_block")
pytestmark = pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH")


def _jobs() -> list[list[Job]]:
    per_kernel: dict[str, list[Job]] = {}
    for name, kernels in APPLIES.items():
        for kernel in sorted(kernels):
            t = build(load(kernel), name)
            per_kernel.setdefault(kernel, []).extend(
                Job(kernel, name, c, t.instantiate(c)) for c in configs(t, LIMIT)
            )
    for kernel, pipeline in COMBINED.items():
        t = build(load(kernel), pipeline)
        per_kernel.setdefault(kernel, []).extend(
            Job(kernel, pipeline, c, t.instantiate(c)) for c in configs(t, 6, seed=1)
        )
    for folder in GOLDEN:
        for path in sorted((ROOT / "tests" / "golden" / folder).glob("*.cu")):
            local = re.findall(r'^\s*#\s*include\s+"([^"]+)"', path.read_text(), re.M)
            if any(not (path.parent / name).is_file() for name in local):
                continue  # it names a project header it does not carry: its own test builds it with one
            pipeline = folder.replace("_", "-")
            for fn in parse(path.read_text(), str(path)).kernels:  # a golden may hold several
                t = run(path.read_text(), pipeline, path=str(path), kernel=fn.name)
                per_kernel.setdefault(f"golden/{folder}", []).extend(
                    Job(f"golden/{folder}/{path.name}", pipeline, c, t.instantiate(c)) for c in configs(t, 8)
                )
    # ptxas stops at the first error of a unit, so keep units small enough to retry cheaply.
    chunks: list[list[Job]] = []
    for jobs in per_kernel.values():
        chunks += [jobs[i : i + 16] for i in range(0, len(jobs), 16)]
    return chunks


@pytest.mark.slow
def test_every_semantic_config_compiles(record_property: pytest.RecordProperty) -> None:
    chunks = _jobs()
    assert sum(len(c) for c in chunks) >= 100
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        rows = [row for chunk in pool.map(_check_kernel, chunks) for row in chunk]
    RECORD.parent.mkdir(parents=True, exist_ok=True)
    RECORD.write_text(json.dumps(rows, indent=1) + "\n")
    failed = [r for r in rows if not r["ok"]]
    record_property("compiled", f"{len(rows) - len(failed)}/{len(rows)}")
    assert not failed, "\n\n".join(
        f"{r['kernel']} {r['pipeline']} {r['config']}:\n{r.get('log')}" for r in failed
    )
    # Spills of combined pipelines come from their block sizes (a 1024-thread __launch_bounds__
    # caps registers); the semantic passes alone must not add any.
    spills = [r for r in rows if "," not in str(r["pipeline"]) and int(str(r.get("spill_stores", 0))) > 0]
    assert not spills, f"spills: {[(r['kernel'], r['pipeline'], r['config']) for r in spills]}"


def test_record_path_is_under_ktx() -> None:
    assert Path(RECORD).parent.name == ".ktx"
