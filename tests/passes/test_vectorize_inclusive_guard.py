"""vectorize on a one-element-per-thread kernel whose guard lets element ``n`` run too.

FasterTransformer's ``slice_copy`` writes ``if (idx > m * n) return;``: elements ``0..m*n``
run (one more than ``m * n``). That guard was refused as "not a bound check"; it is now read
as the bound ``m * n + 1``, and the pack test says so (a pack is taken only where its last
element is at most ``m * n``), so the rewrite runs exactly the elements the original ran.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from passtest import apply, remarks

SRC = """\
__global__ void copy2(const float* __restrict in, float* __restrict out, const int m, const int n) {
    int idx = blockDim.x * blockIdx.x + threadIdx.x;
    if (idx > m * n) {
        return;
    }
    out[idx] = in[idx] * 2.f;
}
void run(const float* i, float* o, int m, int n) { copy2<<<(m * n + 256) / 256, 256>>>(i, o, m, n); }
"""


@pytest.mark.parametrize(
    ("guard", "bound"),
    [
        ("if (idx > m * n) {\n        return;\n    }", "(m * n) + 1"),  # inclusive, return form
        ("if (m * n < idx) return;", "(m * n) + 1"),  # mirrored
        ("if (idx >= m * n) return;", "(m * n)"),  # exclusive, as before
    ],
)
def test_the_pack_test_carries_the_inclusive_bound(guard: str, bound: str) -> None:
    src = SRC.replace("if (idx > m * n) {\n        return;\n    }", guard)
    t = apply(src, "vectorize")
    assert [k.name for k in t.knobs] == ["VEC_THREAD"], remarks(t)
    out = t.instantiate({"VEC_THREAD": 4})
    assert f"ktx_p * 4 + 4 <= {bound}" in out
    if "+ 1" not in bound:
        assert f"<= {bound} + 1" not in out


def test_a_block_guard_up_to_n_is_inclusive_too() -> None:
    src = SRC.replace(
        "if (idx > m * n) {\n        return;\n    }\n    out[idx] = in[idx] * 2.f;",
        "if (idx <= m * n) {\n        out[idx] = in[idx] * 2.f;\n    }",
    )
    t = apply(src, "vectorize")
    assert "ktx_p * 4 + 4 <= (m * n) + 1" in t.instantiate({"VEC_THREAD": 4})


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_every_width_builds_for_sm90(tmp_path: Path) -> None:
    t = apply(SRC, "vectorize")
    for vec in t.knobs[0].values:
        cu = tmp_path / f"k{vec}.cu"
        cu.write_text(t.instantiate({"VEC_THREAD": vec}))
        r = subprocess.run(
            ["nvcc", "-std=c++17", "-arch=sm_90", "-ptx", "-o", str(cu.with_suffix(".ptx")), str(cu)],
            capture_output=True,
            text=True,
        )
        assert r.returncode == 0, r.stderr[-2000:]
