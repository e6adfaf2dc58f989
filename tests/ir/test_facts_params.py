"""What ``ktx init`` learns from the source, asked of the facts layer directly (no spec, no draft).

The drafter (:mod:`ktx.draft`) is one consumer; these tests pin the answers themselves, so that
another (``--check``'s spec-vs-source checks, the agent) can rely on them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ktx.ir import parse
from ktx.ir.errors import KtxError
from ktx.ir.facts.dtypes import dtype_of
from ktx.ir.facts.launcher import choose_kernel, deduce_template_args, launcher_of
from ktx.ir.facts.params import read_kernel, read_only_when, role_of, size_use, subscript_extent, view_type

SRC = """\
typedef float floatX;
template <typename T>
__global__ void axpy(T* __restrict__ y, const T* __restrict__ x, floatX* stats, T a, int n, int bits) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
  if (i == 0) stats[0] = (floatX)(1 << bits);
}
void launch(float* y, const float* x, floatX* s, float a, int n, int bits) {
  axpy<<<(n + 255) / 256, 256>>>(y, x, s, a, n, bits);
}
"""


def test_roles_extents_and_sizes() -> None:
    module = parse(SRC, "axpy.cu")
    fn, _site = choose_kernel(module, "axpy.cu", None)
    k = read_kernel(module, fn)
    params = {p.name: p for p in fn.params}
    roles = {name: role_of(k, p)[0] for name, p in params.items() if p.is_pointer}
    assert roles == {"y": "inout", "x": "in", "stats": "out"}
    _, subs = role_of(k, params["x"])
    assert subscript_extent(k, params["x"], subs, {}) == "[n]"  # x[i] under if (i < n)
    assert size_use(k, "n") is not None
    assert size_use(k, "bits") is None  # a shift's amount is a bit count, not a size


HANDED = """\
template <typename T>
__device__ void rows_(T* y, const T* x, int n1, int n2, int bits) {
  for (int c = threadIdx.x; c < n2; c += blockDim.x) y[blockIdx.x * n2 + c] = x[c] * (1 << bits);
}
__global__ void rows(float* y, const float* x, int n1, int n2, int bits) { rows_<float>(y, x, n1, n2, bits); }
void launch(float* y, const float* x, int n1, int n2, int b) { rows<<<n1, 256>>>(y, x, n1, n2, b); }
"""


def test_a_size_handed_on_to_a_device_function_is_a_size() -> None:
    module = parse(HANDED, "rows.cu")
    fn, _site = choose_kernel(module, "rows.cu", "rows")
    k = read_kernel(module, fn)
    use = size_use(k, "n2")
    assert use is not None and k.text(use) == "c < n2"  # in rows_, where it bounds the loop
    assert size_use(k, "bits") is None  # rows_ shifts by it: no size there either
    assert size_use(k, "n1") is None  # rows_ takes it and never uses it
    assert size_use(k, "n2", depth=0) is None  # not followed: the kernel itself only hands it on
    params = {q.name: q for q in fn.params}
    assert role_of(k, params["y"])[0] == "out"  # rows_ stores through it
    assert role_of(k, params["y"], depth=0)[0] is None


def test_a_pointer_handed_on_with_an_offset_has_the_callees_role() -> None:
    src = HANDED.replace("rows_<float>(y, x,", "rows_<float>(y + blockIdx.x, x,")
    module = parse(src, "rows.cu")
    fn, _site = choose_kernel(module, "rows.cu", "rows")
    y = next(q for q in fn.params if q.name == "y")
    assert role_of(read_kernel(module, fn), y)[0] == "out"


def test_template_args_and_dtypes_from_the_launch() -> None:
    module = parse(SRC, "axpy.cu")
    fn, site = choose_kernel(module, "axpy.cu", "axpy")
    assert deduce_template_args(module, fn, site).values == ("float",)  # from y's float*
    launcher = launcher_of(module, site)
    assert launcher is not None and launcher.name == "launch"
    path = Path("axpy.cu")
    assert dtype_of(module, path, "const float") == "fp32"
    assert dtype_of(module, path, "floatX") == "fp32"  # through the typedef
    assert dtype_of(module, path, "Unknown") is None


def test_choosing_a_kernel_says_what_is_missing() -> None:
    with pytest.raises(KtxError, match="never launched"):
        choose_kernel(parse("__global__ void k(float* x) { x[0] = 1.f; }", "k.cu"), "k.cu", None)
    with pytest.raises(KtxError, match="no kernel 'other'"):
        choose_kernel(parse(SRC, "axpy.cu"), "axpy.cu", "other")


HELPERS = """\
struct vec { float v[4]; __device__ void load(const float* p); __device__ void store(float* p); };
template <int N> __device__ void store_global(float* dst, const float* src);
__global__ void k(float* in, float* out, float* res, float* scale, int* counter, int n) {
  vec a;
  a.load(in + blockIdx.x * n);
  float* r = res + blockIdx.x * n;
  float buf[4];
  store_global<16>(r, buf);
  a.store(out + blockIdx.x * n);
  *scale = (*scale) * 2.0f;
  *counter += 1;
}
void go(float* a, float* b, float* c, float* s, int* t, int n) { k<<<n, 1>>>(a, b, c, s, t, n); }
"""


def test_roles_without_subscripts_come_from_derefs_and_load_store_helpers() -> None:
    from ktx.ir.facts.params import pointer_uses

    module = parse(HELPERS, "k.cu")
    fn, _site = choose_kernel(module, "k.cu", None)
    k = read_kernel(module, fn)
    params = {p.name: p for p in fn.params}
    roles = {name: role_of(k, p)[0] for name, p in params.items() if p.is_pointer}
    assert roles == {"in": "in", "out": "out", "res": "out", "scale": "inout", "counter": "inout"}
    assert pointer_uses(k, params["scale"]).deref_only
    assert not pointer_uses(k, params["in"]).deref_only


def test_vector_types_are_their_elements_and_lanes() -> None:
    from ktx.ir.facts.dtypes import vector_of

    module = parse("typedef float4 vec_t;\n__global__ void k(float4* x) {}\n", "v.cu")
    here = Path("v.cu")
    assert vector_of(module, here, "const float4") == ("fp32", 4)
    assert vector_of(module, here, "vec_t") == ("fp32", 4)
    assert vector_of(module, here, "__half2") == ("fp16", 2)
    assert vector_of(module, here, "__nv_bfloat162") == ("bf16", 2)
    assert vector_of(module, here, "uint2") == ("uint32", 2)
    assert vector_of(module, here, "float") is None


GUARDED = """\
struct blk { float d; signed char qs[32]; };
template <bool has_ff>
__global__ void k(float* y, const float* x, const float* ff, const float* w, blk* q, int n, int s) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float2* w2 = (const float2*) w;
  float f = has_ff ? ff[i] : 1.0f;
  if (s != 0) { y[i] = y[i] + x[i] * f; } else { y[i] = x[i] * f + w2[i / 2].x; }
  q[i].qs[0] = 1; q[i].d = f;
}
void go(float* y, const float* x, const float* ff, const float* w, blk* q, int n, int s) {
  k<true><<<(n + 255) / 256, 256>>>(y, x, ff, w, q, n, s);
}
"""


def test_reads_only_under_a_test_of_the_knobs_and_views_of_another_type() -> None:
    module = parse(GUARDED, "g.cu")
    fn, _site = choose_kernel(module, "g.cu", None)
    k = read_kernel(module, fn)
    params = {p.name: p for p in fn.params}
    subs = {name: role_of(k, p)[1] for name, p in params.items() if p.is_pointer}
    assert read_only_when(k, subs["ff"]) == "has_ff"
    assert read_only_when(k, subs["y"]) == "s != 0"  # written on both paths, read on one
    assert read_only_when(k, subs["x"]) is None  # read in both branches of ``s != 0``
    assert view_type(k, params["w"], subs["w"]) == "float2"
    assert view_type(k, params["x"], subs["x"]) is None
    # a store into a field of a subscripted element is a store: q is written, never read
    assert role_of(k, params["q"])[0] == "out"


def test_a_store_through_a_row_pointer_still_reads_the_row_pointer() -> None:
    src = (
        "__global__ void k(float** rows, int n) {\n  int i = threadIdx.x;\n"
        "  if (i < n) rows[i][0] = 1.0f;\n}\nvoid go(float** r, int n) { k<<<1, 256>>>(r, n); }\n"
    )
    module = parse(src, "r.cu")
    fn, _site = choose_kernel(module, "r.cu", None)
    k = read_kernel(module, fn)
    (rows,) = [p for p in fn.params if p.name == "rows"]
    assert role_of(k, rows)[0] == "in"  # rows[i] is read; the store goes where it points


def _extent(
    src: str, name: str, grid: tuple[str, ...], block: tuple[str, ...]
) -> tuple[str | None, dict[str, str]]:
    """``affine_extent`` of pointer ``name`` under the given drafted launch."""
    from ktx.ir.facts.launcher import LaunchDraft
    from ktx.ir.facts.params import affine_extent, grid_bounds

    module = parse(src, "k.cu")
    fn = module.kernel()
    k = read_kernel(module, fn)
    grid_bounds(k, grid)
    p = next(q for q in fn.params if q.name == name)
    env = {q.name: q.name for q in fn.params if not q.is_pointer}  # the launch passes them as they are
    env.update({f"__grid{i}": g for i, g in enumerate(grid)})
    launch = LaunchDraft(grid, block, "0", "", ())
    return affine_extent(k, p, env, {}, launch), k.spanned


GLOBAL_ROWS = """\
__global__ void q(const float* x, float* y, int rows, int cols) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (col >= cols) return;
  if (row >= rows) return;
  unsigned long long i = (unsigned long long)row * (unsigned long long)cols + (unsigned long long)col;
  y[i] = x[i];
}
"""


def test_a_row_of_global_thread_indices_is_one_dimension_bounded_by_its_guard() -> None:
    # row * cols + col, each the sum blockIdx * blockDim + threadIdx: two dimensions, not four
    extent, spanned = _extent(GLOBAL_ROWS, "x", ("(cols + 31) // 32", "(rows + 31) // 32"), ("32", "32"))
    assert extent == "[rows, cols]"
    assert spanned == {}  # both bounds are the kernel's own guards


UNGUARDED_ROWS = """\
__global__ void m(const float* x, float* y, int ncols) {
  const int col = blockDim.y * blockIdx.y + threadIdx.y;
  const int row = blockDim.x * blockIdx.x + threadIdx.x;
  if (col >= ncols) return;
  const int i = row * ncols + col;
  y[i] = x[i];
}
"""


def test_rows_no_guard_bounds_are_the_launchs_threads_and_say_so() -> None:
    extent, spanned = _extent(UNGUARDED_ROWS, "y", ("nrows", "(ncols + 31) // 32", "1"), ("1", "32", "1"))
    assert extent == "[nrows, ncols]"  # grid.x * block.x with block.x = 1
    assert spanned == {"y": "nrows"}  # the draft doubts it: the kernel never bounds row


WIDENED = """\
__global__ void s(float* out, const float* in, const int d) {
  const int t = blockIdx.x;
  const long long td = t * int64_t(d);
  for (int j = threadIdx.x; j < d; j += blockDim.x) out[td + j] = in[2 * td + j];
}
"""


def test_a_widening_cast_of_a_size_is_the_size() -> None:
    assert _extent(WIDENED, "out", ("tokens",), ("256",))[0] == "[tokens, d]"
    assert _extent(WIDENED, "in", ("tokens",), ("256",))[0] == "[tokens, 2 * d]"  # a padded row


def test_a_one_dimensional_thread_index_keeps_grid_and_block_apart() -> None:
    # the plain chain already reads blockIdx.x * blockDim.x + threadIdx.x: no merge (cuda-samples'
    # uniform_add spec writes [blocks, threads])
    src = "__global__ void u(int* d, int n) { int id = blockIdx.x * blockDim.x + threadIdx.x; d[id] += n; }"
    assert _extent(src, "d", ("nb",), ("256",))[0] == "[nb, 256]"


MOVED = """\
__global__ void n(const float* x, float* dst, const int ncols, const long long stride_row) {
  const int nrows = gridDim.x;
  const int nchannels = gridDim.y;
  const int row = blockIdx.x;
  const int channel = blockIdx.y;
  const int sample = blockIdx.z;
  x += row * stride_row;
  dst += ((sample * nchannels + channel) * nrows + row) * ncols;
  for (int col = threadIdx.x; col < ncols; col += blockDim.x) dst[col] = x[col];
}
"""


def _moved(name: str) -> str | None:
    from ktx.ir.facts.launcher import LaunchDraft
    from ktx.ir.facts.params import grid_bounds, moved_extent

    module = parse(MOVED, "k.cu")
    fn = module.kernel()
    k = read_kernel(module, fn)
    grid = ("rows", "channels", "samples")
    grid_bounds(k, grid)
    env = {"ncols": "ncols", **{f"__grid{i}": g for i, g in enumerate(grid)}}
    p = next(q for q in fn.params if q.name == name)
    return moved_extent(k, p, env, {}, LaunchDraft(grid, ("256",), "0", "", ()))


def test_a_pointer_moved_once_at_the_top_reads_from_its_offset() -> None:
    # dst's offset is dense in the grid: [samples, channels, rows, ncols]
    assert _moved("dst") == "[samples, channels, rows, ncols]"
    # x's stride is the caller's (a parameter with no value): no extent, the draft keeps its TODO
    assert _moved("x") is None


ADDRESSES = """\
template <int B, typename T> __device__ void load_vec(T* dst, const T* src);
template <int B, typename T> __device__ void store_vec(T* dst, const T* src);
__device__ void mix(float* acc, const float* v);
__global__ void scale_rows(float* x, const float* g, float* acc, int total, int d) {
  const int off = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
  float* row = acc + off;
  if (off < total) {
    float v[4], w[4];
    load_vec<16>(v, x + off);
    load_vec<16>(w, g + off % d);
    store_vec<16>(x + off, v);
    mix(row, v);
  }
}
"""


def test_addresses_handed_to_calls_and_the_extent_their_offsets_read() -> None:
    from ktx.ir.facts.launcher import LaunchDraft
    from ktx.ir.facts.params import address_extent, handed_addresses

    module = parse(ADDRESSES, "h.cu")
    fn = next(f for f in module.functions if f.name == "scale_rows")
    k = read_kernel(module, fn)
    params = {p.name: p for p in fn.params}
    launch = LaunchDraft(("(total + 1023) // 1024",), ("256",), "0", "", ())
    got = [(a.callee, a.text, a.helper) for a in handed_addresses(k, params["x"])]
    assert got == [("load_vec", "off", True), ("store_vec", "off", True)]
    env = {"total": "rows * cols", "d": "cols"}
    x = address_extent(k, params["x"], env, {}, launch)
    assert x is not None and x[0] == "[(rows * cols)]"  # off < total, in the launcher's sizes
    g = address_extent(k, params["g"], env, {}, launch)
    assert g is not None and g[0] == "[cols]"  # g + off % d: below d
    # through a local pointer derived from acc, handed to a callee that names no load or store
    acc = address_extent(k, params["acc"], env, {}, launch)
    assert acc is not None and acc[0] == "[(rows * cols)]" and acc[1].callee == "mix" and not acc[1].helper
    assert handed_addresses(k, params["d"]) == []


VIEWS = """\
__global__ void add4(float* y, const float* x, const float* b, int n, int row4, int m) {
  const float4* xv = reinterpret_cast<const float4*>(x);
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n / 4) {
    float4 a = xv[i];
    float4 c = reinterpret_cast<const float4*>(b)[i % row4];
    reinterpret_cast<float4*>(y)[i] = a;
  }
}
"""


def test_a_vector_view_extent_is_counted_in_the_arrays_own_elements() -> None:
    from ktx.ir.facts.params import pointer_uses, view_extent

    module = parse(VIEWS, "v.cu")
    fn = next(f for f in module.functions if f.name == "add4")
    k = read_kernel(module, fn)
    params = {p.name: p for p in fn.params}
    env = {"n": "rows * cols", "row4": "cols // 4"}
    assert view_extent(k, params["x"], env) == "[rows * cols]"  # (rows * cols) // 4 float4s, times 4
    assert view_extent(k, params["b"], env) == "[cols]"  # i % row4: row4 float4s
    assert view_extent(k, params["b"], {"row4": "r"}) == "[r * 4]"  # no division to undo
    uses = pointer_uses(k, params["y"])
    assert uses.writes and not uses.reads  # the store through the cast: y is written


def test_an_address_sum_in_any_order_and_a_short_load_helper_name() -> None:
    from ktx.ir.facts.launcher import LaunchDraft
    from ktx.ir.facts.params import address_extent, handed_addresses

    src = (
        "template <typename V, typename T> __device__ void Ldg(V& v, const T* p);\n"
        "__global__ void rows(const float* src, int ld, int num, int dim) {\n"
        "  for (int ti = blockIdx.x; ti < num; ti += gridDim.x)\n"
        "    for (int di = threadIdx.x * 4; di < dim; di += blockDim.x * 4) {\n"
        "      float v[4]; Ldg(v, src + ti * ld + di); Ldg(v, di + src); }\n"
        "}\n"
    )
    module = parse(src, "r.cu")
    fn = next(f for f in module.functions if f.name == "rows")
    k = read_kernel(module, fn)
    x = next(p for p in fn.params if p.name == "src")
    got = [(a.callee, a.text, a.helper) for a in handed_addresses(k, x)]
    assert got == [("Ldg", "ti * ld + di", True), ("Ldg", "di", True)]
    found = address_extent(k, x, {}, {}, LaunchDraft(("num",), ("128",), "0", "", ()))
    assert found is not None and found[0] == "[num, ld]"  # rows of pitch ld, as a subscript reads
