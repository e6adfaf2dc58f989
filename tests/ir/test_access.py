"""ktx.ir.access: roots of pointers, strides and offsets of subscripts, aliasing."""

from __future__ import annotations

from ktx.ir import parse
from ktx.ir.access import affine, analyze_loop, coefficient, element_size, roots, terms
from ktx.ir.memref import Root

SRC = """\
template <typename T, int K>
__global__ void k(T* __restrict__ out, const T* __restrict__ in, float* loose, const int d) {
  extern __shared__ float smem[];
  float* stash = smem + 4;
  const long long t = blockIdx.x;
  const T* __restrict__ row = in + t * K * d;
  T* __restrict__ orow = out + t * d;
  T* moved = out;
  moved = moved + 1;
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    float acc = 0.f;
    for (int j = 0; j < K; ++j) acc += row[j * d + i];
    stash[i] = acc;
    orow[i] = acc > 0.f ? row[i] : row[2 * i];
    loose[i + 1] = orow[i - 1];
  }
}
"""


def module_and_kernel():  # type: ignore[no-untyped-def]
    m = parse(SRC)
    return m, m.kernel()


def test_roots_follow_local_pointers() -> None:
    m, k = module_and_kernel()
    r = roots(m, k)
    assert r["row"] == Root("in", "global", True, True, "T")
    assert r["orow"] == Root("out", "global", True, False, "T")
    assert r["stash"] == Root("smem", "shared", True, False, "float")
    assert r["loose"].restrict is False
    assert r["moved"].space == "unknown"  # reassigned: its origin is not one place


def test_strides_offsets_and_context() -> None:
    m, k = module_and_kernel()
    info = analyze_loop(m, k, m.loops[0])
    rows = [(a.kind, a.pointer, a.stride, a.offset, a.conditional, len(a.loops)) for a in info.accesses]
    assert rows == [
        ("load", "row", 1, "j * d", False, 1),
        ("store", "stash", 1, "", False, 0),
        ("store", "orow", 1, "", False, 0),
        ("load", "row", 1, "", True, 0),
        ("load", "row", 2, None, True, 0),
        ("store", "loose", 1, "1", False, 0),
        ("load", "orow", 1, "-(1)", False, 0),
    ]
    assert info.var == "i"
    assert {"acc", "j"} <= info.declared


def test_conflicts_name_the_pair() -> None:
    m, k = module_and_kernel()
    info = analyze_loop(m, k, m.loops[0])
    found = info.conflicts()
    assert any(c.startswith("orow[i] and orow[i - 1] may touch the same memory") for c in found)
    assert any("loose[i + 1]" in c and "aliasing memory" in c for c in found)
    assert not any("stash" in c for c in found)  # shared memory never aliases global memory


def test_coefficient_and_affine() -> None:
    m = parse("__global__ void k(int a, int b) { int x = (a * 4 + b) * 2 + 3 * (b - a) + a * a; }")
    value = next(n for n in m.tree.root_node.children[0].children[-1].children if n.type == "declaration")
    expr = value.child_by_field_name("declarator").child_by_field_name("value")  # type: ignore[union-attr]
    parts = terms(expr)
    assert len(parts) == 3
    assert coefficient(m, parts[1].node, "b") == 3
    assert coefficient(m, parts[2].node, "a") is None  # a * a: not linear
    assert affine(m, parts[0].node, {"a"}) and affine(m, parts[1].node, {"a", "b"})
    assert not affine(m, parts[2].node, {"a"})


def test_element_sizes_through_template_arguments() -> None:
    m, k = module_and_kernel()
    assert element_size(m, "T", k, ["__half", "4"]) == 2
    assert element_size(m, "T", k, ["float", "4"]) == 4
    assert element_size(m, "float4", k, []) == 16


def test_load_intrinsics_read_and_do_not_escape() -> None:
    m = parse(
        """__global__ void k(float* __restrict__ out, const float* __restrict__ in, int n) {
  float s = 0.f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    s += __ldg(&in[i]) + __ldcs(&in[i + 1]);
    __stcs(&out[i], s);
  }
}"""
    )
    info = analyze_loop(m, m.kernel(), m.loops[0])
    rows = [(a.kind, a.pointer, a.reads, a.writes, a.pinned, a.node.type) for a in info.accesses]
    assert rows == [
        ("load", "in", True, False, False, "call_expression"),  # the whole __ldg(...) is the load
        ("load", "in", True, False, False, "call_expression"),
        # a store, as every model says; pinned: rewriting the subscript alone would drop the hint
        ("store", "out", True, True, True, "subscript_expression"),
    ]
    assert m.text(info.accesses[0].span) == "__ldg(&in[i])"
