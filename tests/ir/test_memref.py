"""ktx.ir.memref: one access record, whichever reader built it (kernel-wide, loop, per-thread)."""

from __future__ import annotations

from ktx.ir import access, affine, affine_tree, parse
from ktx.ir.access import analyze_loop
from ktx.ir.facts.elements import element_accesses, element_body
from ktx.ir.memref import UNKNOWN, MemRef, Root

LOOP = """\
__global__ void k(float4* __restrict__ y, const float* __restrict__ x, float* z, int n, int C) {
  const float* row = x + blockIdx.x * C;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    z[i] = row[i + 2];
    y[i] = reinterpret_cast<const float4*>(row)[i];
  }
}
"""

ELEMENT = """\
__global__ void k(float* __restrict__ out, const float* __restrict__ in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { out[i] = in[i] > 0.f ? in[i] : in[i + 1]; }
}
void go(float* o, const float* x, int n) { k<<<(n + 255) / 256, 256>>>(o, x, n); }
"""


def test_the_loop_reader_and_the_kernel_reader_agree_on_root_and_affine_index() -> None:
    m = parse(LOOP)
    facts = m.facts()
    loop = analyze_loop(m, m.kernel(), m.loops[0], facts.roots)
    assert all(isinstance(a, MemRef) for a in (*loop.accesses, *facts.refs))
    in_loop = [(a.kind, a.pointer, a.root, str(a.index), a.stride, a.offset) for a in loop.accesses]
    assert in_loop == [
        ("store", "z", "z", "i", 1, ""),
        ("load", "row", "x", "2 + C*blockIdx.x + i", 1, "2"),  # through the local row pointer
        ("store", "y", "y", "i", 1, ""),
        # the loop reader names no root through a cast: no affine index there ...
        ("load", "reinterpret_cast<const float4*>(row)", "", "None", 1, ""),
    ]
    # ... where the kernel-wide reader reaches x, 4 root elements per float4
    cast = next(r for r in facts.refs if r.pointer.startswith("reinterpret_cast"))
    assert (cast.root, str(cast.index), cast.width) == ("x", "C*blockIdx.x + 4*i", 4)
    wide = {(r.node.start_byte, r.root, str(r.index), r.width) for r in facts.refs}
    for a in loop.accesses:
        if a.root:
            assert (a.node.start_byte, a.root, str(a.index), a.width) in wide
    # the may-alias class comes with the memory, whichever reader built the record
    assert {a.pointer: a.alias for a in loop.accesses if a.root} == {
        "row": "restrict:x",
        "z": "global",
        "y": "restrict:y",
    }
    assert {r.root: r.alias for r in facts.refs} == {"x": "restrict:x", "z": "global", "y": "restrict:y"}
    assert facts.alias_class("nowhere") == UNKNOWN.alias_class == "unknown"


def test_the_element_reader_marks_what_packs_on_the_same_records() -> None:
    m = parse(ELEMENT)
    k = m.kernel()
    eb = element_body(m, k)
    assert eb is not None and not isinstance(eb, str)
    refs = element_accesses(m, k, eb)
    assert not isinstance(refs, str)
    rows = [(r.kind, r.pointer, r.offset, r.conditional, r.packable, str(r.index)) for r in refs]
    assert rows == [
        ("store", "out", "", False, True, "blockDim.x*blockIdx.x + threadIdx.x"),
        ("load", "in", "", False, False, "blockDim.x*blockIdx.x + threadIdx.x"),
        # the same element loaded under the condition reads the pack; another element stays
        # scalar, and then every access of `in` does (a scalar load beside a pack)
        ("load", "in", "", True, False, "blockDim.x*blockIdx.x + threadIdx.x"),
        ("load", "in", "1", True, False, "1 + blockDim.x*blockIdx.x + threadIdx.x"),
    ]
    assert {r.memory for r in refs} == {
        Root("out", "global", True, False, "float"),
        Root("in", "global", True, True, "float"),
    }


def test_a_store_intrinsic_reads_in_every_reader() -> None:
    m = parse(
        "__global__ void k(float* __restrict__ out, int n) {\n"
        "  for (int i = threadIdx.x; i < n; i += blockDim.x) __stcs(&out[i], 1.f);\n}"
    )
    (wide,) = m.facts().refs
    (in_loop,) = analyze_loop(m, m.kernel(), m.loops[0]).accesses
    for r in (wide, in_loop):
        assert (r.kind, r.intrinsic, r.pinned, r.reads, r.writes) == ("store", "__stcs", True, True, True)


def test_one_index_reader() -> None:
    assert access._index_node is affine._index_node is affine_tree.index_node
