"""vectorize where a loop's one store is made in both branches of an if/else (ViT's
``add_bias_concat_clstoken_add_posembed``: the class-token row or the input row decides the
value, not whether element ``id`` is written). The lanes fill the pack in either branch and it
is stored once; a store in one branch only, or under a further condition, keeps its condition
and the pointer stays scalar. ``test_vectorize_host.py::concat`` runs every width on the host.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from passtest import apply, remarks
from test_vectorize_host import CONCAT


def test_a_store_in_both_branches_is_packed_once() -> None:
    t = apply(CONCAT, "vectorize")
    assert [(k.name, k.values) for k in t.knobs] == [("VEC_L0", (1, 2, 4))]
    code = t.instantiate({"VEC_L0": 4})
    assert "ktx::pack<float, 4> ktx_out;" in code
    assert code.count("ktx_out.v[ktx_j] = ") == 2
    assert code.count("ktx::store(out + ktx_p * 4, ktx_out);") == 1


def test_a_store_in_one_branch_only_is_refused() -> None:
    src = CONCAT.replace("    } else {\n      out[id] = in[id - n] * 2.f;\n", "")
    assert "else" not in src
    t = apply(src, "vectorize")
    assert not t.knobs
    assert any("under a condition" in r for r in remarks(t))


def test_a_store_under_a_further_condition_is_refused() -> None:
    src = CONCAT.replace("      out[id] = in[id - n] * 2.f;", "      if (n > 1) out[id] = in[id - n] * 2.f;")
    t = apply(src, "vectorize")
    assert not t.knobs


def test_stores_at_different_indices_are_refused() -> None:
    src = CONCAT.replace("      out[id] = in[id - n] * 2.f;", "      out[id + 1] = in[id - n] * 2.f;")
    t = apply(src, "vectorize")
    assert not t.knobs


#: CTranslate2's rotary: `y[i]` stored in each branch of an if / else if / else chain (the copy
#: past ndims, the interleaved pairs, the halves), x read at i +- 1 and i +- middle
ROTARY = """\
template <bool interleave>
__global__ void rotary(const float* x, const float* sin, const float* cos, float* y, long ndims, long depth) {
  const long middle = ndims / 2;
  x += blockIdx.x * depth;
  y += blockIdx.x * depth;
  for (long i = threadIdx.x; i < depth; i += blockDim.x) {
    if (i >= ndims)
      y[i] = x[i];
    else if (interleave)
      y[i] = x[i] * cos[i] + (i % 2 == 0 ? -x[i + 1] : x[i - 1]) * sin[i];
    else
      y[i] = x[i] * cos[i] + (i < middle ? -x[i + middle] : x[i - middle]) * sin[i];
  }
}
void run(const float* x, const float* s, const float* c, float* y, long nd, long d, int rows) {
  rotary<true><<<rows, 128>>>(x, s, c, y, nd, d);
}
"""


def test_a_store_in_every_branch_of_an_else_if_chain_is_packed_once() -> None:
    t = apply(ROTARY, "vectorize")
    assert [k.name for k in t.knobs] == ["VEC_L0"], remarks(t)
    code = t.instantiate({"VEC_L0": 4})
    assert code.count("ktx_y.v[ktx_j] = ") == 3
    assert code.count("ktx::store(y + ktx_p * 4, ktx_y);") == 1
    # x has no __restrict__: its reads at i + 1, i - 1, i + middle, i - middle are range-checked
    for lo in ("((1))", "((-(1)))", "((middle))", "((-(middle)))"):
        assert f"reinterpret_cast<unsigned long long>(x + {lo})" in code


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # the chain ends without an else: an element below ndims may take no branch
        ("    else\n      y[i] = x[i] * cos[i] + (i < middle",
         "    else if (middle > 0)\n      y[i] = x[i] * cos[i] + (i < middle"),
        # one branch stores elsewhere
        ("    if (i >= ndims)\n      y[i] = x[i];", "    if (i >= ndims)\n      y[i + 1] = x[i];"),
        # one branch stores under a further condition
        ("    if (i >= ndims)\n      y[i] = x[i];",
         "    if (i >= ndims) {\n      if (depth > 2) y[i] = x[i];\n    }"),
    ],
)
def test_a_chain_where_some_element_may_not_be_stored_is_refused(old: str, new: str) -> None:
    assert old in ROTARY
    t = apply(ROTARY.replace(old, new), "vectorize")
    assert not t.knobs, remarks(t)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_the_chain_rewrite_builds_for_sm_90(tmp_path: Path) -> None:
    t = apply(ROTARY, "vectorize")
    (k,) = t.knobs
    for vec in k.values:
        cu = tmp_path / f"k{vec}.cu"
        cu.write_text(t.instantiate({k.name: vec}))
        ptx = cu.with_suffix(".ptx")
        r = subprocess.run(["nvcc", "-std=c++17", "-arch=sm_90", "-ptx", "-o", str(ptx), str(cu)],
                           capture_output=True, text=True)  # fmt: skip
        assert r.returncode == 0, r.stderr[-2000:]
        if vec == 4:
            assert "st.global.v4.f32" in ptx.read_text() or "st.global.v4.u32" in ptx.read_text()
