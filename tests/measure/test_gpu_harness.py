"""On a GPU: planted bad kernels each end as their own failure while the run goes on; the suite's
original kernels verify against themselves and against their Python references."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from ktx.measure.gpu import Options
from ktx.measure.harness import Harness
from ktx.measure.types import Candidate, Status, original_candidate
from ktx.spec import find_specs
from ktx.specload import load_spec

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
SUITE = find_specs(ROOT / "kernels")

# A plain, scalar silu_and_mul written for these tests; BODY is replaced to plant faults.
SIMPLE = r"""
#include <cuda_bf16.h>
template <typename T>
__global__ void silu_and_mul_kernel(T* __restrict__ out, const T* __restrict__ input, const int d) {
  const long long t = blockIdx.x;
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    const float x = __bfloat162float(input[t * 2 * d + i]);
    const float y = __bfloat162float(input[t * 2 * d + d + i]);
    float r = x / (1.f + __expf(-x)) * y;
    BODY
  }
}
"""
STORE = "out[t * d + i] = __float2bfloat16(r);"


def planted(base: Candidate, label: str, body: str, **changes: object) -> Candidate:
    return replace(
        base, source=SIMPLE.replace("BODY", body), label=label, config={"plant": len(label)}, **changes
    )


def test_planted_failures_each_recorded_and_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KTX_CACHE_DIR", str(tmp_path))
    spec = load_spec(ROOT / "kernels" / "silu_and_mul")
    point = spec.find_point("tokens=4,d=4096")
    base = original_candidate(spec)
    cases = [
        (planted(base, "good", STORE), Status.OK, ""),
        (
            planted(base, "writes-nothing", "(void)r;"),
            Status.WRONG_RESULT,
            "NaN/Inf where the reference has none",
        ),
        (
            planted(base, "out-of-bounds", "out[t * d + i + (1LL << 40)] = __float2bfloat16(r);"),
            Status.CRASH,
            "",
        ),
        (
            # clock64() is opaque to the compiler, so this loop cannot be proven finite or removed.
            planted(
                base, "hangs", "const long long t0 = clock64(); while (clock64() - t0 >= 0) { } " + STORE
            ),
            Status.TIMEOUT,
            "",
        ),
        (
            # one 16-byte pack (8 bf16) stored from the first element past the end of out: only
            # the guard zones see it (issue 18)
            planted(
                base,
                "one-pack-past-the-end",
                STORE + " if (t == gridDim.x - 1 && i == d - 1) "
                "*reinterpret_cast<uint4*>(out + (t + 1) * d) = make_uint4(0u, 0u, 0u, 0u);",
            ),
            Status.WRONG_RESULT,
            "out: wrote past its end (first at element 16,384 + 0)",
        ),
        (planted(base, "slightly-wrong", "r *= 1.03f; " + STORE), Status.WRONG_RESULT, "elements differ"),
        (
            planted(base, "odd-only", "if (d % 8 != 0 && i == d - 1) r += 1.f; " + STORE),
            Status.WRONG_RESULT,
            "d=40",
        ),
        (planted(base, "too-big-block", STORE, block=("2048",)), Status.RESOURCES, "2048"),
        (planted(base, "no-compile", "this is not C++;"), Status.COMPILE_ERROR, ""),
        (planted(base, "good-again", STORE), Status.OK, ""),
    ]
    opts = Options(rounds=3, time=False)
    with Harness(spec, options=opts, timeout_s=30) as h:
        results = list(h.measure_many([(c, point) for c, _, _ in cases]))
        starts = h.supervisor.starts
    report = "\n".join(
        f"{c.label}: {m.status} {m.message[:200]}" for (c, _, _), m in zip(cases, results, strict=True)
    )
    for (cand, want, fragment), m in zip(cases, results, strict=True):
        assert m.status is want, report
        assert fragment in m.message, report
        assert m.label == cand.label
    assert results[0].verified == ("tokens=4,d=4096", "tokens=4,d=4097", "tokens=4,d=4093")
    assert starts >= 3  # the crash and the hang each cost one worker


@pytest.mark.parametrize("folder", SUITE, ids=lambda p: p.name)
@pytest.mark.parametrize("reference", ["original", "python"])
def test_original_verifies(folder: Path, reference: str) -> None:
    spec = load_spec(folder)
    if reference == "python" and not spec.reference.python:
        pytest.skip("no Python reference")
    # The two smallest shapes of the quick set: the float64 references are slow on huge ones.
    quick = spec.shape_set("quick" if any(s.name == "quick" for s in spec.shapes) else None)
    points = sorted(quick.points, key=lambda p: spec.bytes_moved(spec.env(p)))[:2]
    with Harness(spec, reference=reference, options=Options(rounds=3, time=False)) as h:  # type: ignore[arg-type]
        for point in points:
            m = h.measure(h.original, point)
            assert m.status is Status.OK, f"{point.name}: {m.status}: {m.message}"
            assert m.verified[0] == point.name and m.rounds == 3
            assert m.resources is not None and m.resources.registers > 0


def test_timing_is_sane() -> None:
    spec = load_spec(ROOT / "kernels" / "silu_and_mul")
    with Harness(spec) as h:
        small = h.measure(h.original, spec.find_point("tokens=1,d=4096"))
        large = h.measure(h.original, spec.find_point("tokens=4096,d=14336"))
        limits = h.device()
    for m in (small, large):
        assert m.ok, m.message
        assert m.single is not None and m.graph is not None and m.single.n >= 50
        assert 0 < m.graph_us <= m.single_us * 1.2  # type: ignore[operator]
        assert m.sol_fraction is not None and 0 < m.sol_fraction < 1.3
    assert large.graph_us > 20 * small.graph_us  # type: ignore[operator]
    assert limits.copy_bandwidth_gbs > 500 and limits.l2_bytes > 0
