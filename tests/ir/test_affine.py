"""ktx.ir.affine: index forms, the thread index and its guard, loop shapes, accesses by any spelling."""

from __future__ import annotations

from pathlib import Path

import pytest
from ktx.ir import parse, parse_file
from ktx.ir.affine import (
    BDIM_X,
    BID_X,
    GDIM_X,
    TID_X,
    Affine,
    accesses,
    guard_of,
    kernel_index,
    loop_shape,
    thread_index,
)

LLMC = Path(__file__).resolve().parents[2] / ".." / "shared" / "llmc" / "dev" / "cuda"
GLOBAL = Affine.sym(BID_X) * Affine.sym(BDIM_X) + Affine.sym(TID_X)


def test_affine_arithmetic_and_coefficients() -> None:
    a = Affine.sym("row") * Affine.sym("C") + Affine.sym("i") + Affine.of(3)
    assert a.coeff("i") == Affine.of(1)
    assert str(a.coeff("row")) == "C"
    assert a.without("i").const == 3
    assert (a - a).terms == ()
    assert (a * a).coeff("i") is None  # i*i: not affine in i
    opaque = Affine.atom("(i / C)", {"i", "C"})
    assert (opaque + Affine.sym("j")).coeff("i") is None  # i hides inside an atom
    assert (opaque + Affine.sym("j")).depends_on({"i"})
    assert a.substitute("i", Affine.of(2) * Affine.sym("k")).coeff("k") == Affine.of(2)
    assert str(Affine.of(-4) + Affine.sym("x")) == "-4 + x"


ONE_PER_THREAD = """\
#define BLOCK_SIZE 128
constexpr int kScale = 4;
__global__ void gelu(float* out, const float* inp, long long n) {
  const int i = threadIdx.x + BLOCK_SIZE * blockIdx.x;
  if (i < n) {
    out[i] = inp[i] * kScale;
  }
}
__global__ void early(float* out, const float* in, int N) {
  size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= N) return;
  out[idx] = __ldg(&in[idx]) + __ldcs(in + idx + 1);
  __stcs(&out[idx + 2], 0.f);
}
void run(float* o, const float* x, long long n) {
  gelu<<<(n + BLOCK_SIZE - 1) / BLOCK_SIZE, BLOCK_SIZE>>>(o, x, n);
  early<<<(n + 255) / 256, 256>>>(o, x, n);
}
"""


def test_thread_index_guard_and_macro_block_size() -> None:
    m = parse(ONE_PER_THREAD)
    gelu, early = m.kernels
    ix = kernel_index(m, gelu)
    assert ix.block_aliases["BLOCK_SIZE"].kind == "define"
    assert ix.block_aliases["BLOCK_SIZE"].value == 128
    t = thread_index(m, gelu)
    assert t is not None and t.var == "i" and t.form == GLOBAL and t.line == 4
    assert t.guard is not None and (t.guard.kind, t.guard.bound_text, t.guard.line) == ("if", "n", 5)
    assert t.guard.body is not None and not t.guard.inclusive
    assert not t.wide and t.overflow_note("4") is not None
    refs = accesses(m, gelu)
    assert [(r.kind, r.root, r.index == GLOBAL) for r in refs] == [
        ("store", "out", True),
        ("load", "inp", True),
    ]

    e = thread_index(m, early)
    assert e is not None and e.var == "idx" and e.wide and e.overflow_note("4") is None
    g = guard_of(m, early, "idx")
    assert g is not None and g.kind == "return" and g.body is None and g.bound_text == "N"


def test_intrinsics_are_loads_and_stores_not_escapes() -> None:
    m = parse(ONE_PER_THREAD)
    refs = accesses(m, m.kernels[1])
    rows = [(r.kind, r.via, r.root, str(r.index)) for r in refs]
    tid = "blockDim.x*blockIdx.x + threadIdx.x"
    assert rows == [
        ("store", "subscript", "out", tid),
        ("load", "__ldg", "in", tid),
        ("load", "__ldcs", "in", f"1 + {tid}"),
        ("store", "__stcs", "out", f"2 + {tid}"),
    ]
    assert not any(r.kind == "address" for r in refs)


ROWS = """\
template <int BS>
__global__ void rows_kernel(float* __restrict__ out, const float* __restrict__ inp, int rows, int C) {
  int row = blockIdx.x;
  while (row < rows) {
    const float* x = inp + row * C;
    float* y = out + (size_t)row * C;
    for (int i = threadIdx.x; i < C; i += BS) {
      y[i] = x[i];
    }
    const float4* x4 = reinterpret_cast<const float4*>(x);
    for (int j = threadIdx.x; j < C / 4; j += blockDim.x) {
      float4 v = x4[j];
      reinterpret_cast<float4*>(y)[j] = v;
    }
    row += gridDim.x;
  }
}
__global__ void grid_stride(float* a, int n) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) a[i] = 0.f;
}
template <int BS>
void go(float* o, const float* x, int rows, int C) { rows_kernel<BS><<<rows, BS>>>(o, x, rows, C); }
"""


def test_loop_shapes_while_rows_block_and_grid_stride() -> None:
    m = parse(ROWS)
    k, gs = m.kernels
    ix = kernel_index(m, k)
    assert ix.block_aliases["BS"].kind == "template"
    shapes = [loop_shape(m, k, lp) for lp in m.loops_in(k)]
    assert [s.stride if s else None for s in shapes] == ["grid-blocks", "block", "block"]
    outer = shapes[0]
    assert outer is not None and outer.var == "row" and outer.start == Affine.sym(BID_X)
    assert outer.step == Affine.sym(GDIM_X) and str(outer.bound) == "rows" and outer.partitions
    assert outer.step_node is not None and outer.step_node.start_point[0] + 1 == 15
    inner = shapes[1]
    assert inner is not None and inner.partitions and inner.cmp == "<"
    s = loop_shape(m, gs, m.loops_in(gs)[0])
    assert s is not None and s.stride == "grid" and s.partitions


def test_local_row_pointers_and_vector_casts() -> None:
    m = parse(ROWS)
    refs = accesses(m, m.kernels[0])
    rows = [(r.kind, r.root, str(r.index), r.unit_type, r.width) for r in refs]
    assert rows == [
        ("store", "out", "C*row + i", "float", 1),
        ("load", "inp", "C*row + i", "float", 1),
        ("load", "inp", "C*row + 4*j", "float4", 4),  # indices in root elements: 4 floats a float4
        ("store", "out", "C*row + 4*j", "float4", 4),
    ]


def test_block_size_parameter_and_constexpr() -> None:
    m = parse(
        """constexpr int kThreads = 256;
__global__ void a(float* x, int n, int block_size) {
  for (int i = threadIdx.x; i < n; i += block_size) x[i] = 0.f;
}
__global__ void b(float* x, int n) {
  for (int i = threadIdx.x; i < n; i += kThreads) x[i] = 0.f;
}
void go(float* x, int n, int block_size) {
  a<<<1, block_size>>>(x, n, block_size);
  dim3 block(kThreads);
  b<<<1, block>>>(x, n);
}
"""
    )
    a, b = m.kernels
    assert kernel_index(m, a).block_aliases["block_size"].kind == "param"
    assert kernel_index(m, b).block_aliases["kThreads"].kind == "constexpr"
    for k in (a, b):
        s = loop_shape(m, k, m.loops_in(k)[0])
        assert s is not None and s.stride == "block" and s.partitions


def test_no_alias_when_launches_disagree() -> None:
    m = parse(
        """#define B1 128
#define B2 256
__global__ void k(float* x) { x[blockIdx.x * B1 + threadIdx.x] = 0.f; }
void go(float* x) { k<<<1, B1>>>(x); k<<<1, B2>>>(x); }
"""
    )
    ix = kernel_index(m, m.kernel())
    assert ix.block_aliases == {}
    ref = accesses(m, m.kernel())[0]
    assert str(ref.index) == "128*blockIdx.x + threadIdx.x"  # B1 is only a constant here


def test_reassigned_pointer_is_unknown_and_unreadable_index_is_an_atom() -> None:
    m = parse(
        """__global__ void k(float* out, const float* inp, int C) {
  const float* x = inp;
  x = out;
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  out[idx / C] = x[0] + inp[idx % C];
}
"""
    )
    refs = accesses(m, m.kernel())
    assert refs[0].index is not None and refs[0].index.coeff("threadIdx.x") is None
    assert refs[1].root == ""  # x was reassigned: its origin is not one place
    assert refs[2].index is not None and refs[2].index.depends_on({"threadIdx.x"})


@pytest.mark.skipif(not LLMC.is_dir(), reason="llm.c checkout not in ../shared/llmc")
def test_every_llmc_kernel_is_indexed() -> None:
    """Every ``__global__`` kernel of llm.c's dev/cuda files is indexed without a crash."""
    files = sorted(LLMC.glob("*.cu"))
    assert files
    kernels = 0
    naive_guarded = 0
    for path in files:
        m = parse_file(path)
        text = path.read_text()
        assert len(m.kernels) == text.count("__global__") - text.count("// __global__"), path.name
        for k in m.kernels:
            ix = kernel_index(m, k)
            ix.accesses()
            for lp in m.loops_in(k):
                ix.loop_shape(lp)
            t = ix.thread_index()
            kernels += 1
            naive_guarded += t is not None and t.guard is not None
    assert kernels > 100
    assert naive_guarded >= 20  # one-element-per-thread kernels: gelu1, residual1, encoder...


def test_template_values_fold_when_every_launch_agrees() -> None:
    m = parse(
        """template <int VEC, int UNROLL = 2>
__global__ void k(float* x, unsigned n) {
  unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  if (n <= t) return;
  x[t * VEC + UNROLL] = 0.f;
}
template <int V> __global__ void d(float* x) { x[threadIdx.x * V] = 0.f; }
void go(float* x, unsigned n) { k<4><<<1, 128>>>(x, n); d<2><<<1, 32>>>(x); d<4><<<1, 32>>>(x); }
"""
    )
    k, d = m.kernels
    assert kernel_index(m, k).template_values == {"VEC": 4, "UNROLL": 2}
    ref = accesses(m, k)[0]
    assert ref.index is not None and ref.index.coeff(TID_X) == Affine.of(4) and ref.index.const == 2
    t = thread_index(m, k)
    assert t is not None and t.type == "unsigned" and not t.wide
    assert t.guard is not None and t.guard.kind == "return" and t.guard.bound_text == "n"  # n <= t mirrored
    assert kernel_index(m, d).template_values == {}  # launches disagree: V stays a symbol
    dref = accesses(m, d)[0]
    assert dref.index is not None and str(dref.index.coeff(TID_X)) == "V"


def test_a_constant_equal_to_every_launch_block_is_blockdim() -> None:
    m = parse(
        """#define TPB 256
#define HIDDEN 768
__global__ void k(float* x, int n) {
  int i = blockIdx.x * TPB + threadIdx.x;
  if (i < n) x[i] = HIDDEN;
}
void go(float* x, int n) { dim3 block(256); k<<<(n + 255) / 256, block>>>(x, n); }
"""
    )
    ix = kernel_index(m, m.kernel())
    assert {n: (a.kind, a.value) for n, a in ix.block_aliases.items()} == {"TPB": ("value", 256)}
    t = ix.thread_index()
    assert t is not None and t.var == "i" and t.guard is not None


def test_loop_accesses_are_those_of_the_body() -> None:
    m = parse(ROWS)
    k = m.kernels[0]
    ix = kernel_index(m, k)
    inner = [lp for lp in m.loops_in(k) if lp.kind == "for"]
    first = ix.loop_accesses(inner[0])
    assert [(r.kind, r.root) for r in first] == [("store", "out"), ("load", "inp")]
    assert len(ix.loop_accesses(m.loops_in(k)[0])) == 4  # the while loop holds all four


COOPERATIVE = """
namespace cg = cooperative_groups;
__global__ void block_rows(float* out, const float* in, int n) {
  cg::thread_block tb = cg::this_thread_block();
  const float* x = in + tb.group_index().x * n;
  for (int i = tb.thread_index().x; i < n; i += tb.dim_threads().x) out[i] = x[i];
}
__global__ void auto_block(float* out, int n) {
  auto tb = cooperative_groups::this_thread_block();
  for (int i = tb.thread_index().x; i < n; i += tb.group_dim().x) out[i] = 0.f;
}
__global__ void grid_rows(float* out, int n) {
  cg::grid_group g = cg::this_grid();
  for (int i = g.thread_index().x; i < n; i += blockDim.x) out[i] = 0.f;
}
__global__ void other_block(float* out, int n) {
  cg::thread_block tb = make_block();
  for (int i = tb.thread_index().x; i < n; i += blockDim.x) out[i] = 0.f;
}
"""


def test_thread_block_indices_are_the_builtins_and_nothing_else_is() -> None:
    """A thread_block's thread_index/group_index/dim_threads are threadIdx/blockIdx/blockDim;
    a grid_group's thread_index (a global index) or a block not from this_thread_block() stays
    opaque, so its loop does not split the index space."""
    m = parse(COOPERATIVE)
    block, auto, grid, other = m.kernels
    s = loop_shape(m, block, m.loops_in(block)[0])
    assert s is not None and s.start == Affine.sym(TID_X) and s.step == Affine.sym(BDIM_X)
    assert s.stride == "block" and s.partitions
    t = loop_shape(m, auto, m.loops_in(auto)[0])
    assert t is not None and t.start == Affine.sym(TID_X) and t.step == Affine.sym(BDIM_X) and t.partitions
    for fn in (grid, other):
        u = loop_shape(m, fn, m.loops_in(fn)[0])
        assert u is None or (u.start != Affine.sym(TID_X) and not u.partitions)
    x_index = [a for a in accesses(m, block) if a.root == "in"]
    assert x_index and all(BID_X in str(a.index) for a in x_index), x_index


_HEURISTIC = """#define WARP_SIZE 32
template <int block_size>
__global__ void k(float* y, const float* x, int n) {
  for (int col = threadIdx.x; col < n; col += block_size) y[blockIdx.x * n + col] = x[blockIdx.x * n + col];
}
void go(float* y, const float* x, int n, int rows) {
  if (n < 1024) {
    const dim3 block_dims(WARP_SIZE, 1, 1);
    k<WARP_SIZE><<<rows, block_dims>>>(y, x, n);
  } else {
    const dim3 block_dims(1024, 1, 1);
    k<1024><<<rows, block_dims>>>(y, x, n);
  }
}
"""


def test_a_template_block_size_the_launcher_picks_by_shape_is_blockdim() -> None:
    # Each launch reads the dim3 local in scope there (not the first one declared in the
    # launcher), and passes the same size as the template argument: block_size is blockDim.x
    # at both launches, although they pass different values.
    m = parse(_HEURISTIC)
    ix = kernel_index(m, m.kernel())
    assert set(ix.block_aliases) == {"block_size"} and ix.block_aliases["block_size"].kind == "template"
    assert ix.template_values == {}  # 32 and 1024: no single value to fold
    (loop,) = m.loops_in(m.kernel())
    shape = ix.loop_shape(loop)
    assert shape is not None and str(shape.step) == "blockDim.x"


def test_a_dim3_local_out_of_scope_at_the_launch_is_not_its_block() -> None:
    # The first ``b`` lives in a block that closed before the launch: the launch's block is 128.
    m = parse(
        """#define BS 128
__global__ void k(float* x) { x[blockIdx.x * BS + threadIdx.x] = 0.f; }
void go(float* x, bool f) {
  if (f) { dim3 b(64); (void)b; }
  dim3 b(BS);
  k<<<1, b>>>(x);
}
"""
    )
    ix = kernel_index(m, m.kernel())
    assert set(ix.block_aliases) == {"BS"}
    assert str(accesses(m, m.kernel())[0].index) == "blockDim.x*blockIdx.x + threadIdx.x"


def test_template_block_sizes_that_differ_from_the_launch_block_are_no_alias() -> None:
    # ``k<1024>`` launched with 256 threads: block_size is not blockDim.x there, so not anywhere.
    m = parse(_HEURISTIC.replace("const dim3 block_dims(1024, 1, 1);", "const dim3 block_dims(256, 1, 1);"))
    assert kernel_index(m, m.kernel()).block_aliases == {}
