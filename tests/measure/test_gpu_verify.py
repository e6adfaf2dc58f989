"""On a GPU: verification on the device catches a planted wrong candidate and an unwritten int8
element (the poison changes between rounds); the original's Python check is cached on disk; a
fresh process's first measurement agrees with its later ones (warm-up)."""

from __future__ import annotations

import json
import os
import statistics
from dataclasses import replace
from pathlib import Path

import pytest

from ktx.measure.gpu import Options
from ktx.measure.harness import Harness
from ktx.measure.types import Status, original_candidate
from ktx.specload import load_spec

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]

SIGN_SPEC = """
kernel = "sign8"
source = "kernel.cu"

[[args]]
name = "out"
dtype = "int8"
shape = "[n]"
role = "out"

[[args]]
name = "x"
dtype = "fp32"
shape = "[n]"
role = "in"

[[args]]
name = "n"
dtype = "int32"
value = "n"

[shapes]
default = [{ n = 4096 }]

[launch]
grid = ["cdiv(n, 256)"]
block = ["256"]
"""

# Every output is -1 (inputs are standard normal): exactly what 0xFF poison reads as in int8.
SIGN_KERNEL = r"""
extern "C" __global__ void sign8(signed char* out, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n SKIP) out[i] = x[i] > 100.f ? 1 : -1;
}
"""


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KTX_CACHE_DIR", str(tmp_path / "cache"))


def test_an_unwritten_int8_element_is_caught(tmp_path: Path) -> None:
    folder = tmp_path / "sign8"
    folder.mkdir()
    (folder / "ktx.toml").write_text(SIGN_SPEC)
    (folder / "kernel.cu").write_text(SIGN_KERNEL.replace("SKIP", ""))
    spec = load_spec(folder)
    point = spec.find_point("n=4096")
    orig = original_candidate(spec)
    hole = replace(orig, source=SIGN_KERNEL.replace("SKIP", "&& i != 5"), config={"HOLE": 1}, label="hole")
    with Harness(spec, options=Options(rounds=3, time=False)) as h:
        good = h.measure(orig, point)
        bad = h.measure(hole, point)
    assert good.status is Status.OK, good.message
    assert bad.status is Status.WRONG_RESULT, bad.message
    # round 1's 0xFF poison reads -1 and matches; round 2's does not
    assert "round 2/3" in bad.message and "first at (5,)" in bad.message, bad.message


def test_a_planted_wrong_candidate_is_caught_on_the_device() -> None:
    spec = load_spec(ROOT / "kernels" / "silu_and_mul")
    point = spec.find_point("tokens=4096,d=14336")
    orig = original_candidate(spec)
    exact = "return x / (1.0f + expf(-x));"
    assert exact in orig.source
    # 5% off everywhere: far beyond bf16's rounding
    wrong = replace(
        orig, source=orig.source.replace(exact, "return 1.05f * x / (1.0f + expf(-x));"),
        config={"PLANT": 1}, label="wrong",
    )  # fmt: skip
    with Harness(spec, options=Options(rounds=3, time=False)) as h:
        ok = h.measure(orig, point)
        bad = h.measure(wrong, point)
        again = h.measure(orig, point)
    assert ok.status is Status.OK and again.status is Status.OK, (ok.message, again.message)
    assert bad.status is Status.WRONG_RESULT, bad.message
    assert "first at" in bad.message and "got" in bad.message and "want" in bad.message
    # the original was checked against the Python reference once; its verdicts are on disk
    cached = list((Path(os.environ["KTX_CACHE_DIR"]) / "reference").glob("*.json"))
    assert cached, "the original's Python-reference verdicts were not cached"


def test_first_measurement_agrees_across_fresh_processes() -> None:
    """In 10 fresh worker processes, the original (measured first) and identical code measured
    after it agree within 1% (median of the ratios), graph mode, at the first default shape."""
    spec = load_spec(ROOT / "kernels" / "silu_and_mul")
    point = spec.shape_set().points[0]
    orig = original_candidate(spec)
    same = replace(orig, config={"SAME": 0}, label="identical")
    ratios = []
    for _ in range(10):
        with Harness(spec) as h:  # a new worker process each time
            first = h.measure(orig, point)
            second = h.measure(same, point)
        assert first.ok and second.ok, (first.message, second.message)
        assert first.graph_us and second.graph_us
        ratios.append(first.graph_us / second.graph_us)
    middle = statistics.median(ratios)
    assert abs(middle - 1) <= 0.01, f"median ratio {middle:.4f}: {[round(r, 4) for r in ratios]}"


def test_first_graph_measurement_of_ten_fresh_processes_agree() -> None:
    """Issue 18: in 1 of 6 fresh processes the first graph measurement of fused_add_rmsnorm at
    tokens=16, d=4096 was 12.6% low. Ten fresh worker processes, each measuring it first, must
    agree within 1% of their median. (KTX_FIRST_TIMES: a file the times are written to.)"""
    spec = load_spec(ROOT / "kernels" / "fused_add_rmsnorm")
    point = spec.find_point("tokens=16,d=4096")
    firsts: list[float] = []
    seconds: list[float] = []  # identical code measured next in the same process, for the record
    same = replace(original_candidate(spec), config={"SAME": 0}, label="identical")
    for _ in range(10):
        with Harness(spec) as h:  # a new worker process each time
            m = h.measure(h.original, point)
            again = h.measure(same, point)
        assert m.ok and m.graph_us, m.message
        firsts.append(m.graph_us)
        seconds.append(again.graph_us or 0.0)
    middle = statistics.median(firsts)
    spread = [round(f / middle - 1, 5) for f in firsts]
    if os.environ.get("KTX_FIRST_TIMES"):
        Path(os.environ["KTX_FIRST_TIMES"]).write_text(
            json.dumps(
                {
                    "kernel": spec.name,
                    "shape": point.name,
                    "first_graph_us": firsts,
                    "second_graph_us": seconds,
                    "median_us": middle,
                    "deviation": spread,
                },
                indent=1,
            )
        )
    assert max(abs(d) for d in spread) <= 0.01, (
        f"first graph times {firsts} µs; deviation from median {spread}"
    )
