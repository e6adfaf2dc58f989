"""The facts layer: one entry point, cached per module, one load/store classifier."""

from __future__ import annotations

from ktx.ir import parse
from ktx.ir.access import analyze_loop
from ktx.ir.affine import kernel_index
from ktx.ir.facts import access_kind, facts_of
from ktx.ir.facts.elements import element_accesses, element_body
from ktx.ir.facts.packing import Plan, loop_plan
from ktx.ir.syntax import walk

ROWS = """template <typename T>
__global__ void rows(T* __restrict__ out, const T* __restrict__ in, T* o2, int d) {
  const T* row = in + blockIdx.x * d;
  float s = 0.f;
  for (int i = threadIdx.x; i < d; i += blockDim.x) { s += (float)row[i]; out[blockIdx.x * d + i] = row[i]; }
  for (int r = blockIdx.x; r < d; r += gridDim.x) o2[r] = in[r];
  for (int c = threadIdx.x % 32; c < d; c += 32) o2[c] = in[c];
  for (int k = 0; k < d; ++k) o2[k] += 1.f;
  for (int g = blockIdx.x * blockDim.x + threadIdx.x; g < d; g += blockDim.x * gridDim.x) o2[g] = 0.f;
}
void go(__half* o, const __half* x, __half* o2, int n, int d) { rows<__half><<<n, 128>>>(o, x, o2, d); }
"""


def test_one_entry_point_cached_per_module() -> None:
    m = parse(ROWS)
    k = m.kernel()
    f = m.facts()
    assert f is m.facts(k) is m.facts("rows") is facts_of(m, k)
    assert f.loop_accesses(m.loops[0]) is f.loop_accesses(m.loops[0])
    assert f.index is kernel_index(m, k)
    # the same bytes parse to the same module (ktx.ir.module's cache), facts included; a module
    # over other bytes (what a pass's edits give) has facts of its own
    assert parse(ROWS) is m and parse(ROWS).facts() is f
    other = parse(ROWS + "\n")
    assert other is not m and other.facts() is not f
    assert m.facts(k, ["float"]) is not f  # bound to other template arguments
    assert m.clang is m.clang  # libclang's view is Module.clang now


def test_loop_owners() -> None:
    f = parse(ROWS).facts()
    assert [(lf.label, lf.owner, lf.partitions) for lf in f.loops] == [
        ("L0", "block", True),
        ("L1", "blocks", True),
        ("L2", "warp", False),
        ("L3", "thread", False),
        ("L4", "grid", True),
    ]


def test_element_types_bound_from_the_launch_or_the_spec() -> None:
    m = parse(ROWS)
    f = m.facts()
    assert f.template_args == ("__half",)
    row = next(r for r in f.refs if r.root == "in")
    assert (row.element_type, row.element_size) == ("__half", 2)
    spec = m.facts(None, ["double"])
    assert {(r.element_type, r.element_size) for r in spec.refs if r.root == "in"} == {("double", 8)}
    unbound = parse(ROWS.split("void go")[0]).facts()
    assert {r.element_size for r in unbound.refs if r.root == "in"} == {None}


def test_refs_roots_aliases_and_conditions() -> None:
    f = parse(ROWS).facts()
    refs = [(r.kind, r.root, str(r.index), r.alias, r.loop_label) for r in f.refs]
    assert refs[:3] == [
        ("load", "in", "blockIdx.x*d + i", "restrict:in", "L0"),  # through the local row pointer
        ("store", "out", "blockIdx.x*d + i", "restrict:out", "L0"),
        ("load", "in", "blockIdx.x*d + i", "restrict:in", "L0"),
    ]
    assert ("update", "o2", "k", "global", "L3") in refs
    assert f.written_roots == frozenset({"out", "o2"})
    assert not f.may_alias("out", "in") and f.may_alias("o2", "in") and f.may_alias("o2", "o2")
    g = parse("__global__ void k(float* y, int n) { if (n) y[0] = 1.f; y[1] = n > 2 ? y[2] : 0.f; }").facts()
    conditional = [(r.kind, r.conditional) for r in g.refs]
    assert conditional == [("store", True), ("store", False), ("load", True)]


def test_one_classifier_a_store_intrinsic_is_a_store_everywhere() -> None:
    src = """__global__ void k(float* out, const float* __restrict__ in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { __stcs(&out[i], __ldg(&in[i])); }
}
__global__ void l(float* out, int n) {
  for (int j = threadIdx.x; j < n; j += blockDim.x) __stcs(&out[j], 1.f);
}
void go(float* o, const float* x, int n) { k<<<n / 256, 256>>>(o, x, n); }"""
    m = parse(src)
    k = m.kernel("k")
    nodes = [n for n in walk(m.tree.root_node) if n.type == "subscript_expression"]
    subs = {(n.text or b"").decode(): access_kind(n) for n in nodes}
    assert subs == {"out[i]": "store", "in[i]": "load", "out[j]": "store"}
    refs = [(r.kind, r.via) for r in kernel_index(m, k).accesses()]
    assert refs == [("store", "__stcs"), ("load", "__ldg")]
    loop = analyze_loop(m, m.kernel("l"), m.loops[0])
    assert [(a.kind, a.via, a.pinned) for a in loop.accesses] == [("store", "__stcs", True)]
    eb = element_body(m, k)
    assert eb is not None and not isinstance(eb, str)
    # refused, naming the intrinsic: rewriting the subscript alone would drop the hint
    assert (
        element_accesses(m, k, eb) == "the body stores out[i] through __stcs (line 3): packs would drop the "
        "__stcs hint (run cache-hints after vectorize instead)"
    )


def test_one_element_per_thread_and_the_launch() -> None:
    src = """#define TPB 128
__global__ void k(float* y, int n) {
  const int i = blockIdx.x * TPB + threadIdx.x;
  if (i >= n) return;
  y[i] = 0.f;
}
void go(float* y, int n) { k<<<(n + TPB - 1) / TPB, TPB>>>(y, n); }"""
    f = parse(src).facts()
    assert f.element is not None and f.element.guard is not None
    assert (f.element.var, f.element.guard.kind, f.element.guard.bound_text) == ("i", "return", "n")
    assert [(a.name, a.kind, a.value) for a in f.launch.block_aliases] == [("TPB", "define", 128)]
    assert len(f.launch.launches) == 1


def test_reductions_are_asked_of_the_facts() -> None:
    src = """__global__ void k(const float* x, float* out, int n) {
  float s = 0.f;
  float m = -1e30f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) { s += x[i]; m = fmaxf(m, x[i]); }
  out[threadIdx.x] = s + m;
}"""
    m = parse(src)
    found = m.facts().reductions()
    text = " ".join(
        " ".join(getattr(r, "carried", ())) or (r.text or b"").decode()
        for r in found  # either recogniser
    )
    assert "s" in text.split() or "s +=" in text
    assert "m" in text.split() or "fmaxf" in text
    assert m.facts().reductions(m.node(m.loops[0].body)) != ()


def test_a_split_across_blocks_is_owned_strictly() -> None:
    src = """__global__ void k(float* __restrict__ out, const float* __restrict__ in, int n) {
  for (int r = blockIdx.x; r < n; r += gridDim.x) out[r] = in[r];
  __syncthreads();
  if (threadIdx.x == 0) out[0] += 1.f;
}
__global__ void y(float* __restrict__ out, const float* __restrict__ in, int n) {
  for (int i = threadIdx.y; i < n; i += blockDim.y) out[i] = in[i];
  __syncthreads();
  if (threadIdx.y == 0) out[0] += 1.f;
}"""
    m = parse(src)
    k, yk = m.facts("k"), m.facts("y")
    assert [lf.partitions for lf in k.loops + yk.loops] == [True, True]
    # a barrier orders the threads of a block, not blocks: the first is refused, the second packs
    assert loop_plan(k, m.loops[0], 16) == (
        "out is also accessed at line 4, and the loop's elements are split across blocks: packs change "
        "which block owns each element"
    )
    assert not isinstance(loop_plan(yk, m.loops[1], 16), str)
    assert not isinstance(loop_plan(k, m.loops[0], 16), Plan)


def test_a_leading_break_is_a_second_bound() -> None:
    bodies = [
        "if (c >= ncols) break; o[c] = x[c];",
        "o[c] = x[c]; if (c >= ncols) break;",
        "if (ncols <= c) { break; } o[c] = x[c]; ncols++;",
        "if (x[c] >= 0.f) break; o[c] = x[c];",
    ]
    src = "\n".join(
        f"__global__ void k{i}(float* __restrict__ o, const float* __restrict__ x, int cols, int ncols) {{\n"
        f"  for (int c = threadIdx.x; c < cols; c += blockDim.x) {{ {b} }}\n}}"
        for i, b in enumerate(bodies)
    )
    m = parse(src)
    plans = [loop_plan(m.facts(f"k{i}"), lp, 16) for i, lp in enumerate(m.loops)]
    first = plans[0]
    assert isinstance(first, Plan) and first.limit is not None and first.limit.text == b"ncols"
    assert plans[1:] == [
        "the body has a `break`: packs cannot stop mid-way",  # not first: statements ran before it
        "the loop bounds use ncols, which the body changes",
        "the body has a `break`: packs cannot stop mid-way",  # a data-dependent exit
    ]


def test_a_template_parameter_bound_to_a_pointer_type_makes_its_parameter_a_buffer() -> None:
    """llm-awq's ``quant_kernel<T, at::Half *, true>``: ``scale_type scale`` is a pointer the
    kernel stores through, so its refs have a root and the parameter counts as stored."""
    from ktx.ir.facts.kernel import with_bound_pointers

    m = parse(
        "template <typename T, typename S>\n"
        "__global__ void k(const T* x, S scale, int n) {\n"
        "  int i = threadIdx.x; if (i < n) scale[i] = x[i]; }\n"
    )
    fn = m.kernel()
    bound = with_bound_pointers(fn, ["float", "at::Half *"])
    scale = bound.params[1]
    assert (scale.pointer_depth, scale.base_type) == (1, "at::Half")
    assert with_bound_pointers(fn, ["float", "float"]) is fn
    stored = {p.name: p.stored for p in m.facts(fn, ["float", "at::Half *"]).params}
    assert stored == {"x": False, "scale": True, "n": False}
    assert not any(p.stored for p in m.facts(fn, ["float", "float"]).params)


def test_a_parenthesized_element_address_handed_to_a_call_may_be_written() -> None:
    """bitsandbytes stores through cub: ``StoreChar(storec).Store(&(out[i]), qvals, n)``. The
    parentheses around ``out[i]`` do not hide the buffer from the may-write answer."""
    m = parse(
        "__global__ void k(const float* a, unsigned char* out, int n) {\n"
        "  unsigned char q[4];\n"
        "  Store(s).Store(&(out[blockIdx.x * 4]), q, n);\n"
        "  Load(l).Load(&(a[blockIdx.x * 4]), q, n); }\n"
    )
    got = {p.name: p.may_write for p in m.facts().params}
    assert got == {"a": False, "out": True, "n": False}
