"""benchmarks/realcode/knobcheck.py: the builds it samples cover every value of each knob that
carries a kernel's own setting (constrained knobs included), and its table counts what it saw."""

from __future__ import annotations

import importlib.util
import json
import sys
from dataclasses import asdict
from pathlib import Path
from types import ModuleType

from ktx.ir.launch import LaunchMapping

from ktx.pipeline import run

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "realcode"


def _load() -> ModuleType:
    sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location("realcode_knobcheck", BENCH / "knobcheck.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["realcode_knobcheck"] = module
    spec.loader.exec_module(module)
    return module


knobcheck = _load()

TILED = """\
template <typename T, int TILE_SIZE, int THREADS, int NUM_PER_TH>
__global__ void dequant(T* out, const unsigned char* in, int n) {
  T vals[NUM_PER_TH];
  for (int j = 0; j < NUM_PER_TH; j++) {
    const int i = blockIdx.x * TILE_SIZE + threadIdx.x * NUM_PER_TH + j;
    vals[j] = i < n ? (T)in[i] : (T)0;
    if (i < n) out[i] = vals[j];
  }
}
"""


def test_covering_builds_every_value_a_constraint_admits_in_as_few_configs() -> None:
    mapping = LaunchMapping(("(n + 511) // 512",), ("64",), "0", (), "spec")
    t = run(TILED, "expose", template_args=["float", "512", "64", "8"], mapping=mapping)
    configs = knobcheck._covering(t, ["THREADS", "NUM_PER_TH"], [{"n": 4096}])
    assert all(c["THREADS"] * c["NUM_PER_TH"] == 512 for c in configs)
    assert sorted(c["THREADS"] for c in configs) == [32, 64, 128, 256]  # each once
    # NUM_PER_TH = 32 would need 16 threads, outside THREADS' domain: never built, never measured.
    assert sorted(c["NUM_PER_TH"] for c in configs) == [2, 4, 8, 16]


def test_covering_skips_what_is_built_and_reaches_values_only_another_passs_knob_admits() -> None:
    # pre_rms_norm's UNROLL=1 covers 4096 columns only with a block of 512 or more: expose alone
    # never admits it, expose with block-size does, and the covering there builds just that.
    sys.path.insert(0, str(BENCH.parents[1] / "tests" / "passes"))
    from test_expose import PER_SHAPE_STRIDED

    mapping = LaunchMapping(("rows",), ("256",), "0", (), "spec")
    args = ["__half", "{2 * ((e + 4095) // 4096)}"]
    points = [{"e": 4096}, {"e": 8192}]
    alone = run(PER_SHAPE_STRIDED, "expose", template_args=args, mapping=mapping)
    built = knobcheck._covering(alone, ["UNROLL"], points)
    assert 1 not in {c["UNROLL"] for c in built}
    both = run(PER_SHAPE_STRIDED, "expose,block-size", template_args=args, mapping=mapping)
    done = frozenset(("UNROLL", c["UNROLL"]) for c in built) | {("BLOCK_X", v) for v in (0, 256, 512, 1024)}
    (extra,) = knobcheck._covering(both, ["UNROLL", "BLOCK_X"], points, done)
    assert extra["UNROLL"] == 1 and extra["BLOCK_X"] >= 512


def test_the_table_counts_settings_knobs_and_failures_and_renders_from_json(tmp_path: Path) -> None:
    Setting, Built, KernelRow = knobcheck.Setting, knobcheck.Built, knobcheck.KernelRow
    rows = [
        KernelRow(
            "p__k",
            "ok",
            [
                Setting("VEC", "template-int", "vector", 8, "expose:VEC", (2, 4, 8)),
                Setting("UNROLL", "template-int", "items", None, "no: per shape", (), True),
                Setting("THREADS", "template-int", "block", 64, "no: expose: why"),
            ],
            {"expose": "VEC"},
            [Built("expose", {"VEC": 2}, "ok"), Built("expose", {"VEC": 4}, "fails: error x")],
        ),
        KernelRow("p__none"),
    ]
    text = "\n".join(knobcheck.table(rows, "title line"))
    assert "- settings: 3; a knob: 1 (per shape, 0 the launcher's pick: 0); no knob: 2" in text
    assert "- kernels with every such setting a knob: 0 of 1" in text
    # every setting without a knob is listed with the pass's remark and the reading of it
    assert "- **p__k THREADS**: not read yet. (The pass: expose: why)" in text
    assert "- candidates built: 2; failed where the original builds: 1" in text
    assert "| p__k | original: ok | 2 | 1 |" not in text and "| p__k | ok | 2 | 1 |" in text
    (tmp_path / "knobcheck.json").write_text(json.dumps([asdict(r) for r in rows]))
    assert (
        knobcheck.main(
            ["--render", str(tmp_path / "knobcheck.json"), "--out", str(tmp_path), "--title", "title line"]
        )
        == 0
    )
    assert (tmp_path / "knobcheck.md").read_text() == text + "\n"
