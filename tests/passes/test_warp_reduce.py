"""warp-reduce: the tree loop or shuffles, by knob; what counts as a tree it can prove."""

from __future__ import annotations

from passtest import apply, remarks
from semantic import APPLIES, build, load, spec_dirs

TREE = """\
__global__ void k(float* __restrict__ out, const float* __restrict__ x) {
  __shared__ float s[256];
  const unsigned tid = threadIdx.x;
  s[tid] = x[blockIdx.x * 256 + tid];
  __syncthreads();
  for (unsigned k = blockDim.x / 2; k > 0; k >>= 1) {
    if (tid < k) s[tid] += s[tid + k];
    __syncthreads();
  }
  if (tid == 0) out[blockIdx.x] = s[0];
}

void launch(float* out, const float* x, int rows) { k<<<rows, 256>>>(out, x); }
"""


def test_knob_and_constraint() -> None:
    t = apply(TREE, "warp-reduce")
    assert [(k.name, k.values, k.default) for k in t.knobs] == [("WARP_REDUCE_L0", (0, 1), 0)]
    assert t.space.constraints == ("WARP_REDUCE_L0 == 0 or (256) % 32 == 0",)
    out = t.instantiate({"WARP_REDUCE_L0": 1})
    assert "for (unsigned k" not in out
    assert out.count("__shfl_down_sync(0xffffffffu, ktx_v, ktx_o)") == 2
    assert out.count("__syncthreads();") == 3  # one before, two in the replacement
    assert "if (ktx_lane == 0) s[0] = ktx_v;" in out


def test_default_is_the_tree() -> None:
    t = apply(TREE, "warp-reduce")
    out = t.instantiate()
    assert "".join(line for line in out.splitlines(keepends=True) if not line.startswith("// ktx: `")) == TREE


def test_block_size_must_be_whole_warps() -> None:
    t = apply(TREE.replace("<<<rows, 256>>>", "<<<rows, blockDim_for(rows)>>>"), "warp-reduce")
    assert remarks(t) == ["L0: no launch mapping: cannot state that blocks are whole warps"]


def test_operators() -> None:
    mx = apply(TREE.replace("s[tid] += s[tid + k];", "s[tid] = fmaxf(s[tid], s[tid + k]);"), "warp-reduce")
    out = mx.instantiate({"WARP_REDUCE_L0": 1})
    assert "ktx_v = fmaxf(ktx_v, __shfl_down_sync(0xffffffffu, ktx_v, ktx_o));" in out
    assert "? s[ktx_lane * 32] : s[0];" in out
    plus = apply(TREE.replace("s[tid] += s[tid + k];", "s[tid] = s[tid + k] + s[tid];"), "warp-reduce")
    assert plus.knobs


def test_trees_it_cannot_prove() -> None:
    product = TREE.replace("s[tid] += s[tid + k];", "s[tid] *= s[tid + k];")
    assert remarks(apply(product, "warp-reduce")) == [
        "L0: `s[tid] *= s[tid + k];` is not sdata[tid] = sdata[tid] OP sdata[tid + k]"
    ]
    offset = TREE.replace("if (tid < k)", "if (tid + 1 < k)")
    assert "is not `tid < k`" in remarks(apply(offset, "warp-reduce"))[0]
    extra = TREE.replace("__syncthreads();\n  }", "__syncthreads();\n    s[0] = 0;\n  }")
    assert "is not one `if (tid < s) ...` and one __syncthreads()" in remarks(apply(extra, "warp-reduce"))[0]
    doubling = TREE.replace("k = blockDim.x / 2; k > 0; k >>= 1", "k = 1; k < blockDim.x; k *= 2")
    assert "does not halve" in remarks(apply(doubling, "warp-reduce"))[0]


def test_applies_where_pinned() -> None:
    found = {p.name for p in spec_dirs() if build(load(p.name), "warp-reduce").knobs}
    assert found == APPLIES["warp-reduce"]


def test_a_difference_is_no_tree_sum() -> None:
    """The shared recogniser reads ``a[t] -= a[t + k]`` as a sum of negations: right for a loop
    over elements, wrong for a tree whose operand is another partial; the pass refuses it."""
    for update in ("s[tid] -= s[tid + k];", "s[tid] = s[tid] - s[tid + k];"):
        (remark,) = remarks(apply(TREE.replace("s[tid] += s[tid + k];", update), "warp-reduce"))
        assert remark.endswith("is not sdata[tid] = sdata[tid] OP sdata[tid + k]"), update
    braced = TREE.replace("s[tid] += s[tid + k];", "{ s[tid] += s[tid + k]; }")
    assert apply(braced, "warp-reduce").knobs
