"""On a GPU: a kernel whose only parameter is a struct holding its buffers as pointers
(causal-conv1d's pattern) reads and writes the spec's ``[[buffers]]`` through the addresses ktx
packs, checked by the harness against a Python reference; and a kernel that hands out slots with
``atomicAdd`` (DeepSpeed's gating) passes its own second run only when its output is compared
order-free."""

from __future__ import annotations

from pathlib import Path

import pytest

from ktx.measure.gpu import Options
from ktx.measure.harness import Harness
from ktx.measure.types import Status
from ktx.specload import load_spec

pytestmark = pytest.mark.gpu

KERNEL = r"""
struct Params {
  int rows, cols; bool negate;
  unsigned int x_row_stride;
  void* __restrict__ x_ptr;    // float [rows, cols]
  void* __restrict__ out_ptr;  // float [rows, cols]
  float* state_ptr;            // float [rows], inout: += the row's first value
  int* unused_ptr;             // null
};
__global__ void through_pointers(Params p) {
  const int r = blockIdx.x;
  const float* x = reinterpret_cast<const float*>(p.x_ptr) + r * p.x_row_stride;
  float* out = reinterpret_cast<float*>(p.out_ptr) + r * p.cols;
  for (int c = threadIdx.x; c < p.cols; c += blockDim.x) out[c] = (p.negate ? -2.0f : 2.0f) * x[c];
  if (threadIdx.x == 0 && p.unused_ptr == nullptr) p.state_ptr[r] += x[0];
}
"""

SPEC = """kernel = "through_pointers"
[[args]]
name = "p"
type = "Params"
fields.rows = "rows"
fields.cols = "cols"
fields.negate = true
fields.x_row_stride = "cols"
fields.x_ptr = "x"
fields.out_ptr = "out"
fields.state_ptr = "state"
fields.unused_ptr = "0"
[[buffers]]
name = "x"
dtype = "fp32"
shape = "[rows, cols]"
[[buffers]]
name = "out"
dtype = "fp32"
shape = "[rows, cols]"
role = "out"
[[buffers]]
name = "state"
dtype = "fp32"
shape = "[rows]"
role = "inout"
[shapes]
default = [{ rows = 4, cols = 256 }, { rows = 33, cols = 1000 }]
[launch]
grid = ["rows"]
block = ["128"]
[reference]
python = "reference:expected"
"""

REFERENCE = """
def expected(inputs, shape):
    assert inputs["p"]["x_ptr"] == "x" and inputs["p"]["unused_ptr"] == 0
    x = inputs["x"]
    return {"out": -2.0 * x, "state": inputs["state"] + x[:, 0]}
"""


def test_the_harness_verifies_buffers_behind_struct_pointers(tmp_path: Path) -> None:
    (tmp_path / "kernel.cu").write_text(KERNEL)
    (tmp_path / "ktx.toml").write_text(SPEC)
    (tmp_path / "reference.py").write_text(REFERENCE)
    spec = load_spec(tmp_path)
    with Harness(spec, reference="python", options=Options(rounds=3)) as h:
        for point in spec.shape_set().points:
            m = h.measure(h.original, point)
            assert m.status is Status.OK, f"{point.name}: {m.status}: {m.message}"


SLOTS = r"""
// Each block takes one slot per item from a shared counter: the slot depends on block order.
__global__ void slots(int* counts, int* owner, int* slot, int groups) {
  if (threadIdx.x != 0) return;
  const int g = blockIdx.x % groups;
  owner[blockIdx.x] = g;
  slot[blockIdx.x] = atomicAdd(counts + g, 1);
}
"""

SLOTS_SPEC = """kernel = "slots"
[[args]]
name = "counts"
dtype = "int32"
shape = "[groups]"
role = "inout"
dist = "int:0..1"
[[args]]
name = "owner"
dtype = "int32"
shape = "[n]"
role = "out"
[[args]]
name = "slot"
dtype = "int32"
shape = "[n]"
role = "out"
{order}
[[args]]
name = "groups"
dtype = "int32"
value = "groups"
[shapes]
default = [{{ n = 65536, groups = 4 }}]
[launch]
grid = ["n"]
block = ["32"]
"""


def test_atomic_slots_pass_the_originals_second_run_only_as_multisets(tmp_path: Path) -> None:
    (tmp_path / "kernel.cu").write_text(SLOTS)
    verdicts = {}
    for order in ("", 'order = "multiset per owner"'):
        (tmp_path / "ktx.toml").write_text(SLOTS_SPEC.format(order=order))
        spec = load_spec(tmp_path)
        with Harness(spec, reference="original", options=Options(rounds=3, time=False)) as h:
            verdicts[order] = h.measure(h.original, spec.shape_set().points[0])
    in_order, free = verdicts[""], verdicts['order = "multiset per owner"']
    assert free.status is Status.OK, free.message
    # 65536 blocks over 4 counters: the block order differs between runs, so do the slots
    assert in_order.status is not Status.OK and "slot" in in_order.message, in_order.message
