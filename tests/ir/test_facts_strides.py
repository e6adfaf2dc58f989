"""Strides a kernel indexes with, read as a dense layout's (:mod:`ktx.ir.facts.strides`)."""

from __future__ import annotations

from ktx.ir import parse
from ktx.ir.facts.launcher import choose_kernel
from ktx.ir.facts.params import read_kernel
from ktx.ir.facts.strides import dense_strides, in_spec_vars


def _strides(src: str) -> dict[str, str]:
    module = parse(src, "k.cu")
    fn, _ = choose_kernel(module, "k.cu", None)
    k = read_kernel(module, fn)
    ints = {p.name: p.base_type for p in fn.params if not p.is_pointer}
    return {name: s.value for name, s in dense_strides(k, ints).items()}


DIGITS = """\
__global__ void k(const float* x, float* y, int n0, int n1, int n2, int s1, int s2, int s3) {
  const int i0 = blockDim.y * blockIdx.y + threadIdx.y;
  if (i0 >= n0) return;
  const int r = blockDim.x * blockIdx.x + threadIdx.x;
  const int i3 = r / (n1 * n2);
  const int i2 = (r - i3 * n1 * n2) / n1;
  const int i1 = r - i3 * n1 * n2 - i2 * n1;
  const int ix = i0 + i1 * s1 + i2 * s2 + i3 * s3;
  y[ix] = x[ix];
}
void go(const float* x, float* y, int n0, int n1, int n2, int a, int b, int c) {
  k<<<dim3(n1 * n2, n0), 1>>>(x, y, n0, n1, n2, a, b, c);
}
"""


def test_the_digits_of_a_flat_index_give_each_stride_as_the_dimensions_inside_it() -> None:
    assert _strides(DIGITS) == {"s1": "n0", "s2": "n0 * n1", "s3": "n0 * n1 * n2"}


CHAIN = """\
__global__ void k(const float* x, float* dst, int ncols, long sr, long sc, long ss) {
  const int nrows = gridDim.x, nchannels = gridDim.y;
  const int row = blockIdx.x, channel = blockIdx.y, sample = blockIdx.z;
  x += sample * ss + channel * sc + row * sr;
  dst += ((sample * nchannels + channel) * nrows + row) * ncols;
  for (int col = threadIdx.x; col < ncols; col += blockDim.x) dst[col] = x[col];
}
void go(const float* x, float* d, int ncols, int nr, int nc, int ns, long a, long b, long c) {
  k<<<dim3(nr, nc, ns), 256>>>(x, d, ncols, a, b, c);
}
"""


def test_strides_beside_a_dense_chain_of_the_same_indices_take_its_pitches() -> None:
    got = _strides(CHAIN)
    assert got == {"sr": "ncols", "sc": "ncols * gridDim.x", "ss": "ncols * gridDim.x * gridDim.y"}
    assert in_spec_vars(got["ss"], {}, {"gridDim.x": "nr", "gridDim.y": "nc"}) == "ncols * nr * nc"
    assert in_spec_vars(got["ss"], {}, {"gridDim.x": "nr"}) is None  # no drafted grid y


ROW = """\
template <int VEC>
__global__ void k(const float* in, float* out, unsigned d, unsigned stride_in) {
  const unsigned bx = blockIdx.x, tx = threadIdx.x;
  const unsigned nthreads = blockDim.x;
  const unsigned rounds = ceil_div(d, VEC * nthreads);
  for (unsigned i = 0; i < rounds; i++) {
    load(in + bx * stride_in + i * nthreads * VEC + tx * VEC);
  }
}
void go(const float* in, float* out, unsigned d, unsigned s, int rows) { k<4><<<rows, 128>>>(in, out, d, s); }
"""


def test_a_row_spanned_by_a_rounded_up_loop_is_the_stride_of_the_block_index() -> None:
    assert _strides(ROW) == {"stride_in": "d"}


def test_no_stride_without_a_rule_that_reads_it() -> None:
    # a stride times an index whose range the kernel never bounds: no guess
    src = """\
__global__ void k(const float* x, float* y, int s, int n) {
  int r = blockIdx.x; int c = threadIdx.x;
  y[r * s + c * n] = x[r * s + c * n];
}
void go(const float* x, float* y, int s, int n) { k<<<n, 32>>>(x, y, s, n); }
"""
    assert _strides(src) == {}
    # a difference, not a sum of strided terms
    src2 = DIGITS.replace("const int ix = i0 + i1 * s1 + i2 * s2 + i3 * s3;", "const int ix = i3 * s3 - i0;")
    assert _strides(src2) == {}
