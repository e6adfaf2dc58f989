"""On a GPU: guard zones (issue 18, item 1). A candidate that writes one pack past the end of
its output is a wrong result naming the buffer, the side and the first element; an original
whose spec gives a buffer too few elements is a spec error, and nothing is measured against it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from ktx.cli import main
from ktx.measure.gpu import Options
from ktx.measure.guards import is_spec_error
from ktx.measure.harness import Harness
from ktx.measure.sanitize import find_sanitizer, sanitize
from ktx.measure.types import Status, original_candidate
from ktx.specload import load_spec

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]

# silu_and_mul, scalar; the last thread of the last row also stores one 16-byte pack (8 bf16)
# starting at the first element past the end of out.
OOB_PACK = r"""
#include <cuda_bf16.h>
template <typename T>
__global__ void silu_and_mul_kernel(T* __restrict__ out, const T* __restrict__ input, const int d) {
  const long long t = blockIdx.x;
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    const float x = __bfloat162float(input[t * 2 * d + i]);
    const float y = __bfloat162float(input[t * 2 * d + d + i]);
    out[t * d + i] = __float2bfloat16(x / (1.f + __expf(-x)) * y);
    if (PLANT && t == gridDim.x - 1 && i == d - 1) {
      *reinterpret_cast<uint4*>(out + (t + 1) * d) = make_uint4(0u, 0u, 0u, 0u);
    }
  }
}
"""

SHORT_SPEC = """
kernel = "fill8"
source = "kernel.cu"

[[args]]
name = "out"
dtype = "int8"
shape = "[n - 8]"
role = "out"

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

# Writes n elements; the spec above says the buffer holds n - 8.
#: ``i ^ 1`` rather than ``i``: the static bounds check (ktx/bounds.py) refuses a spec whose
#: affine store provably passes its extent when the spec is loaded, before any GPU run (the H200
#: run of 2026-11-26 showed it doing so here); an index it cannot bound leaves the write past
#: the end to the guard zones, which this test is about.
FILL_KERNEL = r"""
extern "C" __global__ void fill8(signed char* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i ^ 1] = 3;
}
"""


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KTX_CACHE_DIR", str(tmp_path / "cache"))


def test_a_pack_past_the_end_is_a_wrong_result() -> None:
    spec = load_spec(ROOT / "kernels" / "silu_and_mul")
    point = spec.find_point("tokens=4,d=4096")
    base = original_candidate(spec)
    clean = replace(base, source=OOB_PACK.replace("PLANT", "false"), config={"PLANT": 0}, label="clean")
    oob = replace(base, source=OOB_PACK.replace("PLANT", "true"), config={"PLANT": 1}, label="oob-pack")
    with Harness(spec, options=Options(rounds=3, time=False)) as h:
        ok = h.measure(clean, point)
        bad = h.measure(oob, point)
        orig = h.measure(h.original, point)
    assert ok.status is Status.OK, ok.message
    assert orig.status is Status.OK, orig.message
    assert bad.status is Status.WRONG_RESULT, bad.message
    assert "out: wrote past its end (first at element 16,384 + 0)" in bad.message, bad.message
    assert not is_spec_error(bad.message)


def test_an_original_writing_past_its_extent_is_a_spec_error(tmp_path: Path) -> None:
    folder = tmp_path / "fill8"
    folder.mkdir()
    (folder / "ktx.toml").write_text(SHORT_SPEC)
    (folder / "kernel.cu").write_text(FILL_KERNEL)
    spec = load_spec(folder)
    point = spec.find_point("n=4096")
    with Harness(spec, options=Options(rounds=2, time=False)) as h:
        orig = h.measure(h.original, point)
        cand = h.measure(replace(h.original, config={"X": 1}, label="tuned"), point)
    assert orig.status is Status.WRONG_RESULT and is_spec_error(orig.message), orig.message
    assert "out: wrote past its end (first at element 4,088 + 0)" in orig.message
    assert "[[args]] out shape = [n - 8] = [4088] is too small" in orig.message
    assert cand.status is Status.WRONG_RESULT and cand.message.startswith("not measured: spec error")


# Issue 21: stores only where an input exceeds 1e30, which a normal draw never does, so the
# original leaves out at its poison. The static check sees a store and lets the spec load; the
# guard code sees out unchanged after the original's launch.
NEVER_KERNEL = r"""
extern "C" __global__ void keep_huge(float* out, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && x[i] > THRESHOLD) out[i] = x[i];
}
"""

NEVER_SPEC = """
kernel = "keep_huge"
source = "kernel.cu"

[[args]]
name = "out"
dtype = "fp32"
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


@pytest.mark.parametrize("threshold", ["1e30f", "-1e30f"])
def test_an_original_that_never_writes_its_out_is_a_spec_error(tmp_path: Path, threshold: str) -> None:
    folder = tmp_path / "keep_huge"
    folder.mkdir()
    (folder / "ktx.toml").write_text(NEVER_SPEC)
    (folder / "kernel.cu").write_text(NEVER_KERNEL.replace("THRESHOLD", threshold))
    spec = load_spec(folder)
    point = spec.find_point("n=4096")
    with Harness(spec, options=Options(rounds=2, time=False)) as h:
        cand = h.measure(replace(h.original, config={"X": 1}, label="tuned"), point)
        orig = h.measure(h.original, point)
    if threshold == "-1e30f":  # writes every element: no spec error, the candidate is verified
        assert orig.status is Status.OK and cand.status is Status.OK, (orig.message, cand.message)
        return
    assert orig.status is Status.WRONG_RESULT and is_spec_error(orig.message), orig.message
    assert "the original kernel leaves out entirely at its poison at n=4096" in orig.message
    assert '[[args]] out is role = "out": is its role "in"?' in orig.message
    assert cand.status is Status.WRONG_RESULT and cand.message.startswith("not measured: spec error"), (
        cand.message
    )


needs_sanitizer = pytest.mark.skipif(find_sanitizer()[0] is None, reason="no compute-sanitizer")


@needs_sanitizer
def test_run_sanitize_is_clean_on_a_suite_kernel(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", str(ROOT / "kernels" / "silu_and_mul"), "--sanitize", "--shape", "tokens=4,d=4096"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "memcheck   clean, 0 errors" in out and "racecheck  clean, 0 errors" in out, out


@needs_sanitizer
def test_sanitize_reports_the_pack_past_the_end() -> None:
    spec = load_spec(ROOT / "kernels" / "silu_and_mul")
    point = spec.find_point("tokens=4,d=4096")
    oob = replace(
        original_candidate(spec),
        source=OOB_PACK.replace("PLANT", "true"),
        config={"PLANT": 1},
        label="oob-pack",
    )
    code, block = sanitize(spec, oob, point)
    assert code == 1, block
    assert "Invalid __global__ write of size 16 bytes" in block, block
