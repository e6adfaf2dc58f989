"""On a GPU: a kernel that takes a parameter struct and CUDA vector types by value gets exactly the
fields the spec gives (issue 22). Two ways: CuPy launches it directly with ``argpack.pack``'s
structured scalars and the kernel's own output is compared with the values; and the harness
verifies the original against a Python reference that computes from the same field values,
so a struct packed wrong (a field shifted by padding, a vector misaligned) fails both."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ktx.measure.argpack import pack, struct_layouts
from ktx.measure.gpu import Options
from ktx.measure.harness import Harness
from ktx.measure.types import Status
from ktx.specload import load_spec

pytestmark = pytest.mark.gpu

KERNEL = r"""
struct Inner { char tag; double bias; };
struct Params { int ncols; float scale; Inner in; short coef[3]; bool flip; };
// Every field reaches the output: out[r, c] = (x[r, c] * scale + bias + coef[c % 3] + tag) * sign
//                                             + div.x * 1000 + div.z + f4.w + i2.y
__global__ void struct_kernel(const float* __restrict__ x, float* __restrict__ out, Params p,
                              uint3 div, float4 f4, int2 i2, int rows) {
  const int r = blockIdx.x;
  if (r >= rows) return;
  for (int c = threadIdx.x; c < p.ncols; c += blockDim.x) {
    double v = (x[r * p.ncols + c] * p.scale + p.in.bias + p.coef[c % 3] + p.in.tag) * (p.flip ? -1.0 : 1.0);
    v += div.x * 1000.0 + div.z + f4.w + i2.y;
    out[r * p.ncols + c] = (float)v;
  }
}
"""

SPEC = """kernel = "struct_kernel"
[[args]]
name = "x"
dtype = "fp32"
shape = "[rows, d]"
[[args]]
name = "out"
dtype = "fp32"
shape = "[rows, d]"
role = "out"
[[args]]
name = "p"
type = "Params"
fields.ncols = "d"
fields.scale = "1.0 / d"
fields.in = { tag = 3, bias = "0.5 * rows" }
fields.coef = [1, -2, "d // 64"]
fields.flip = true
[[args]]
name = "div"
fields = { x = "d // 32", y = 0, z = 7 }
[[args]]
name = "f4"
fields = { x = 0, y = 0, z = 0, w = 0.25 }
[[args]]
name = "i2"
fields = { x = 0, y = "-rows" }
[[args]]
name = "rows"
dtype = "int32"
value = "rows"
[shapes]
default = [{ rows = 4, d = 256 }, { rows = 3, d = 1000 }]
[launch]
grid = ["rows"]
block = ["128"]
[reference]
python = "reference:expected"
"""

REFERENCE = """
import numpy as np

def expected(inputs, shape):
    p, div, f4, i2 = inputs["p"], inputs["div"], inputs["f4"], inputs["i2"]
    x = inputs["x"]
    d = x.shape[1]
    coef = np.array([p["coef[0]"], p["coef[1]"], p["coef[2]"]])[np.arange(d) % 3]
    sign = -1.0 if p["flip"] else 1.0
    v = (x * p["scale"] + p["in.bias"] + coef + p["in.tag"]) * sign
    return {"out": v + div["x"] * 1000.0 + div["z"] + f4["w"] + i2["y"]}
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "kernel.cu").write_text(KERNEL)
    (tmp_path / "ktx.toml").write_text(SPEC)
    (tmp_path / "reference.py").write_text(REFERENCE)
    return tmp_path


def test_cupy_passes_the_packed_struct_by_value(folder: Path) -> None:
    import cupy as cp

    spec = load_spec(folder)
    layouts = struct_layouts(spec)
    point = spec.shape_set().points[1]
    env = spec.env(point)
    rows, d = int(env["rows"]), int(env["d"])
    x = cp.asarray(np.random.default_rng(0).standard_normal((rows, d)), dtype=cp.float32)
    out = cp.full((rows, d), cp.nan, dtype=cp.float32)
    module = cp.RawModule(code=KERNEL, options=("-std=c++17",), name_expressions=["struct_kernel"])
    fn = module.get_function("struct_kernel")
    structs = [pack(a, layouts[a.name], env) for a in spec.args if a.is_struct]
    fn((rows,), (128,), (x, out, *structs, np.int32(rows)))
    got = cp.asnumpy(out).astype(np.float64)
    xs = cp.asnumpy(x).astype(np.float64)
    coef = np.array([1.0, -2.0, d // 64])[np.arange(d) % 3]
    want = -(xs * (1.0 / d) + 0.5 * rows + coef + 3) + (d // 32) * 1000.0 + 7 + 0.25 - rows
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-3)


def test_harness_verifies_the_original_against_the_reference(folder: Path) -> None:
    spec = load_spec(folder)
    with Harness(spec, reference="python", options=Options(rounds=3, time=False)) as h:
        for point in spec.shape_set().points:
            m = h.measure(h.original, point)
            assert m.status is Status.OK, f"{point.name}: {m.status}: {m.message}"


ARRAY_KERNEL = r"""
struct Batch { int n_tokens; int n_sequences; };
struct alignas(16) Seq { int start; int n; int seen; };
// DeepSpeed's logits_gather, reduced: each sequence's last token, found through descriptors.
__global__ void gather_last(const float* __restrict__ x, float* __restrict__ out, const Batch* batch,
                            const Seq* seqs, int d) {
  const int s = blockIdx.x;
  if (s >= batch->n_sequences) return;
  const Seq seq = seqs[s];
  for (int c = threadIdx.x; c < d; c += blockDim.x) out[s * d + c] = x[(seq.start + seq.n - 1) * d + c];
}
"""

ARRAY_SPEC = """kernel = "gather_last"
[[args]]
name = "x"
dtype = "fp32"
shape = "[n_seqs * seq_len, d]"
[[args]]
name = "out"
dtype = "fp32"
shape = "[n_seqs, d]"
role = "out"
[[args]]
name = "batch"
type = "Batch"
shape = "[1]"
fields = { n_tokens = "n_seqs * seq_len", n_sequences = "n_seqs" }
[[args]]
name = "seqs"
type = "Seq"
shape = "[n_seqs]"
fields = { start = "i * seq_len", n = "seq_len", seen = 0 }
[[args]]
name = "d"
dtype = "int32"
value = "d"
[shapes]
default = [{ n_seqs = 5, seq_len = 3, d = 256 }]
[launch]
grid = ["n_seqs"]
block = ["128"]
[reference]
python = "reference:expected"
"""

ARRAY_REFERENCE = """
def expected(inputs, shape):
    x = inputs["x"].reshape(shape["n_seqs"], shape["seq_len"], shape["d"])
    return {"out": x[:, -1, :]}
"""


def test_harness_fills_an_array_of_structs_per_element(tmp_path: Path) -> None:
    """The descriptors' bytes (16-byte Seq, each start from its index) reach the kernel: the
    original matches a reference that gathers each sequence's last row."""
    (tmp_path / "kernel.cu").write_text(ARRAY_KERNEL)
    (tmp_path / "ktx.toml").write_text(ARRAY_SPEC)
    (tmp_path / "reference.py").write_text(ARRAY_REFERENCE)
    spec = load_spec(tmp_path)
    with Harness(spec, reference="python", options=Options(rounds=2, time=False)) as h:
        m = h.measure(h.original, spec.shape_set().points[0])
        assert m.status is Status.OK, f"{m.status}: {m.message}"
