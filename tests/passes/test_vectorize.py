"""vectorize: packed accesses, run-time alignment check, scalar tail, refusals, defaults."""

from __future__ import annotations

import re

import pytest
from ktx.ir import parse
from ktx.passes._device import MARKER
from passtest import apply, remarks, suite_source
from semantic import APPLIES, build, load

SRC = """\
__global__ void add(float* __restrict__ out, const float* __restrict__ x, const float* __restrict__ y, int n)
{
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    out[i] = x[i] + y[i];
  }
}
"""


def without_machinery(text: str) -> str:
    """The instantiated source minus the helper block and the config comment."""
    start = text.find(MARKER)
    if start >= 0:
        end = text.find("}  // namespace ktx\n", start) + len("}  // namespace ktx\n")
        text = text[:start] + text[end:]
    return "".join(
        line for line in text.splitlines(keepends=True) if not line.startswith("// ktx: `") and line.strip()
    )


def lines(text: str) -> str:
    return "".join(line for line in text.splitlines(keepends=True) if line.strip())


def test_flat_loop_gets_a_vec_knob_and_a_tail() -> None:
    t = apply(SRC, "vectorize")
    assert [(k.name, k.values, k.default) for k in t.knobs] == [("VEC_L0", (1, 2, 4), 1)]
    out = t.instantiate({"VEC_L0": 4})
    assert "ktx::aligned<4>(out) &&" in out and "? n / 4 : 0;" in out
    assert "const auto ktx_x = ktx::load<4>(x + ktx_p * 4);" in out
    assert "ktx::store(out + ktx_p * 4, ktx_out);" in out
    # the tail starts past the packed elements with the original stride and body
    assert re.search(
        r"for \(int i = ktx_packs_L0 \* 4 \+ blockIdx\.x \* blockDim\.x \+ threadIdx\.x; i < n;", out
    )
    assert out.count("out[i] = x[i] + y[i];") == 1


def test_default_config_is_the_original_loop() -> None:
    t = apply(SRC, "vectorize")
    assert without_machinery(t.instantiate()) == lines(SRC)


@pytest.mark.parametrize("name", ["act_and_mul_scalar", "moe_sum_scalar", "moe_sum"])
def test_default_config_of_suite_kernels_is_the_original(name: str) -> None:
    source = suite_source(name)
    t = apply(source, "vectorize")
    assert t.knobs
    assert without_machinery(t.instantiate()) == lines(source)


def test_domain_follows_element_sizes() -> None:
    half = build(load("act_and_mul_scalar"), "vectorize")  # __half: 2 bytes
    assert half.knobs[0].values == (1, 2, 4, 8)
    small = apply(SRC, "vectorize{max_bytes=8}")
    assert small.knobs[0].values == (1, 2)


def test_nested_loop_packs_per_iteration_and_widens_the_accumulator() -> None:
    t = build(load("moe_sum_scalar"), "vectorize")
    out = t.instantiate({"VEC_L0": 8})
    assert "float x[8];" in out
    assert "const auto ktx_input = ktx::load<8>(input + (token_idx * TOPK + k) * d + ktx_p * 8);" in out
    assert "x[ktx_j] += to_float(ktx_input.v[ktx_j]);" in out
    # aligned for every k: k = 0 checked, and the step between k and k + 1
    assert "(((token_idx * TOPK + 1) * d) - ((token_idx * TOPK + 0) * d)) % 8 == 0" in out


def test_loops_already_packed_or_with_odd_starts_are_left_alone() -> None:
    t = apply(suite_source("silu_and_mul"), "vectorize")
    assert not t.knobs and t.source == t.original
    # the scalar tail from `num_packs * VEC + threadIdx.x` starts at a block-uniform offset, which
    # packs could take; its stores meet the packed loop's, with no barrier between
    assert any(r.startswith("L2: out is also accessed at line 81") for r in remarks(t)), remarks(t)


def test_refusals() -> None:
    # a read whose range over the loop has no closed form (x[2 * i] reaches 2 * n) stays refused
    alias = SRC.replace("__restrict__ ", "").replace("out[i] = x[i] + y[i];", "out[i] = x[2 * i] + y[i];")
    assert remarks(apply(alias, "vectorize")) == [
        "L0: aliasing: out[i] and x[2 * i] may touch aliasing memory (line 4 and 4)"
    ]
    assert (
        "only a run-time check can tell, and tail=false has none"
        in remarks(apply(SRC.replace("__restrict__ ", ""), "vectorize{tail=false}"))[0]
    )
    strided = SRC.replace("out[i] = x[i] + y[i];", "out[2 * i] = x[i];")
    assert "which is not element i of a row" in remarks(apply(strided, "vectorize"))[0]
    gather = SRC.replace("out[i] = x[i] + y[i];", "y[0] += x[3 * i];")
    assert "which is not element i of a row" in remarks(apply(gather, "vectorize"))[0]
    only_strided = SRC.replace("out[i] = x[i] + y[i];", "s += x[3 * i];").replace(
        "  for", "  float s = 0.f;\n  for"
    )
    assert remarks(apply(only_strided, "vectorize")) == [
        "L0: no unconditional, contiguous access p[i + offset] through a named pointer"
    ]
    early = SRC.replace("out[i] = x[i] + y[i];", "if (x[i] < 0) break; out[i] = 1.f;")
    assert "packs cannot stop mid-way" in remarks(apply(early, "vectorize"))[0]
    owned = SRC.replace("  }\n}", "  }\n  out[0] = 1.f;\n}")
    assert "no __syncthreads() in between" in remarks(apply(owned, "vectorize"))[0]


def test_reads_at_other_indices_are_packed_behind_a_range_check() -> None:
    """FasterTransformer's add-bias kernels: no __restrict__, the bias read at ``i % h``, a scale
    at ``[0]``, the next element at ``i + 1``. Each read's range over the loop is known, so the
    packed loop runs only where it is apart from the elements the loop writes."""
    src = SRC.replace("__restrict__ ", "").replace(", int n)", ", const float* s, int n, int h)")
    src = src.replace("out[i] = x[i] + y[i];", "out[i] = x[i + 1] * s[0] + y[i % h];")
    t = apply(src, "vectorize")
    assert [k.name for k in t.knobs] == ["VEC_L0"], remarks(t)
    note = remarks(t, "rewritten")[0]
    assert "finds x[(1) .. (1) + (n)) apart from the out elements the loop writes" in note
    assert "finds s[0 .. 1) apart" in note and "finds y[1 - (h) .. (h)) apart" in note
    code = t.instantiate({"VEC_L0": 4})
    # written: [out, out + n); read through y: (y - h, y + h)
    assert (
        "(((h)) > (1 - (h)) && (reinterpret_cast<unsigned long long>(out) + sizeof(*out) * "
        "static_cast<unsigned long long>(n) <= reinterpret_cast<unsigned long long>(y + (1 - (h))) || "
        "reinterpret_cast<unsigned long long>(y + ((h))) <= reinterpret_cast<unsigned long long>(out)))"
    ) in code
    assert (
        "only a run-time check can tell, and tail=false has none"
        in remarks(apply(src, "vectorize{tail=false}"))[0]
    )
    # through a local of the body, initialised once (FasterTransformer's `int b_idx = id % n;`)
    local = src.replace("y[i % h];", "y[b];").replace("out[i] =", "const int b = i % h; out[i] =")
    assert "finds y[1 - (h) .. (h)) apart" in remarks(apply(local, "vectorize"), "rewritten")[0]
    assigned = local.replace("out[i] =", "b += 1; out[i] =").replace("const int b", "int b")
    assert "aliasing: out[i] and y[b]" in remarks(apply(assigned, "vectorize"))[0]
    # a read through a pointer the body declares: the check before the loop could not name it
    inner_ptr = src.replace("y[i % h];", "yy[i % h];").replace(
        "out[i] =", "const float* yy = y + 1; out[i] ="
    )
    assert "aliasing: out[i] and yy[i % h]" in remarks(apply(inner_ptr, "vectorize"))[0]
    # a modulus the body declares cannot be read before the loop: no range, refused
    inner = src.replace("out[i] = x[i + 1] * s[0] + y[i % h];", "const int hh = 2 * h; out[i] = y[i % hh];")
    assert remarks(apply(inner, "vectorize")) == [
        "L0: aliasing: out[i] and y[i % hh] may touch aliasing memory (line 4 and 4)"
    ]


def test_conditional_access_stays_scalar_but_the_rest_is_packed() -> None:
    src = SRC.replace("out[i] = x[i] + y[i];", "out[i] = x[i] > 0.f ? y[i] : 0.f;")
    t = apply(src, "vectorize")
    out = t.instantiate({"VEC_L0": 4})
    assert "ktx::load<4>(x + ktx_p * 4)" in out
    assert "ktx::load<4>(y" not in out
    assert "ktx_x.v[ktx_j] > 0.f ? y[i] : 0.f" in out  # y is read only where the condition holds


def test_template_parses_and_every_value_instantiates() -> None:
    t = build(load("moe_sum_scalar"), "vectorize")
    assert not [d for d in parse(t.source).diagnostics if d.severity == "error"]
    for v in t.knobs[0].values:
        assert "KTX_" not in t.instantiate({"VEC_L0": v})


def test_applies_where_pinned() -> None:
    from semantic import spec_dirs

    found = {p.name for p in spec_dirs() if build(load(p.name), "vectorize").knobs}
    assert found == APPLIES["vectorize"]


def test_tail_false_states_constraints_instead() -> None:
    t = build(load("act_and_mul_scalar"), "vectorize{tail=false}")
    assert t.space.constraints == (
        "VEC_L0 == 1 or (d) % VEC_L0 == 0",
        "VEC_L0 == 1 or ((2) * (d)) % VEC_L0 == 0",
    )
    out = t.instantiate({"VEC_L0": 8})
    assert "const int ktx_packs_L0 = d / 8;" in out
    assert "ktx::aligned" not in out and "ktx_packs_L0 * 8 +" not in out  # no check, no tail
    assert t.space.feasible({"VEC_L0": 8}, {"tokens": 4, "d": 4096})
    assert not t.space.feasible({"VEC_L0": 8}, {"tokens": 4, "d": 4097})
    topk = build(load("moe_sum"), "vectorize{tail=false}")  # TOPK (a template argument) drops out
    assert topk.space.constraints == ("VEC_L0 == 1 or (d) % VEC_L0 == 0",)
    per_thread = SRC.replace("out[i] = x[i] + y[i];", "out[i] = x[i + threadIdx.y];")
    assert "varies per thread with no size factor" in remarks(apply(per_thread, "vectorize{tail=false}"))[0]


def test_pointers_that_may_alias_are_packed_behind_a_run_time_check() -> None:
    """No ``__restrict__`` (llm.c's naive kernels, most first drafts): pointers indexed alike are
    packed only where ``ktx::apart`` finds their ranges the same elements or disjoint; the
    scalar loop, in the original order, takes every element otherwise."""
    alias = SRC.replace("__restrict__ ", "")
    result = apply(alias, "vectorize")
    (first, _) = remarks(result)
    assert first.startswith("L0: exposed VEC_L0 {1, 2, 4}; packed 3 pointer(s): out, x, y")
    assert "out and x may alias" in first and "out and y may alias" in first
    text = result.instantiate({"VEC_L0": 4})
    assert "ktx::apart(out, x, n) &&" in text and "ktx::apart(out, y, n) &&" in text
    # row pointers with an offset: the check covers the row from that offset
    rows = """\
__global__ void norm(float* out, const float* inp, int C) {
  const float* x = inp + blockIdx.x * C;
  float* o = out + blockIdx.x * C;
  for (int i = threadIdx.x; i < C; i += blockDim.x) {
    o[i] = x[i] * 2.f;
  }
}
"""
    text = apply(rows, "vectorize").instantiate({"VEC_L0": 4})
    assert "ktx::apart(o, x, C) &&" in text


def test_tie_gives_every_loop_one_width() -> None:
    """``vectorize{tie=true}``: one knob for all loops; a loop whose pointers allow fewer elements
    (8-byte doubles: 2 per 16 bytes) bounds it with a constraint instead of a knob of its own."""
    two = """\
__global__ void two(float* __restrict__ out, const float* __restrict__ x, double* __restrict__ acc,
                    const double* __restrict__ y, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    out[i] = x[i] * 2.f;
  }
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    acc[i] = y[i] + 1.0;
  }
}
"""
    untied = apply(two, "vectorize")
    assert [k.name for k in untied.knobs] == ["VEC_L0", "VEC_L1"]
    tied = apply(two, "vectorize{tie=true}")
    assert [k.name for k in tied.knobs] == ["VEC_LOOPS"] and tied.knobs[0].values == (1, 2, 4)
    assert tied.space.constraints == ("VEC_LOOPS <= 2",)
    text = tied.instantiate({"VEC_LOOPS": 2})
    assert text.count("ktx::load<2>(") == 2
    assert any("VEC_LOOPS <= 2 here" in r for r in remarks(tied))


def test_a_branch_written_maximum_is_a_reduction() -> None:
    """``if (x[i] > m) m = x[i];`` (first drafts of softmax) reorders like ``fmaxf``; with an
    ``else`` or another value it is carried state, refused."""
    base = """\
__global__ void rowmax(float* __restrict__ out, const float* __restrict__ x, int n) {
  float m = -1e30f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    BODY
  }
  out[threadIdx.x] = m;
}
"""
    for body in ("if (x[i] > m) m = x[i];", "if (m < x[i]) { m = x[i]; }", "if (x[i] <= m) m = x[i];"):
        t = apply(base.replace("BODY", body), "vectorize")
        assert remarks(t)[0].startswith("L0: exposed VEC_L0"), (body, remarks(t))
    for body in ("if (x[i] > m) m = x[i]; else m = 0.f;", "if (x[i] > m) m = x[i] * 2.f;"):
        (first, *_) = remarks(apply(base.replace("BODY", body), "vectorize"))
        assert "the body assigns m, declared outside the loop" in first, (body, first)


def test_a_pack_written_before_it_is_read_is_not_loaded() -> None:
    """``out[i] = e; s += out[i];``: every element is written first, so the pack starts empty (one
    pass over ``out`` fewer); ``out[i] = out[i] * 2.f`` reads before it writes and loads."""
    src = """\
__global__ void k(float* __restrict__ out, const float* __restrict__ x, float* __restrict__ sums, int n) {
  float s = 0.f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    BODY
  }
  sums[threadIdx.x] = s;
}
"""
    text = apply(src.replace("BODY", "out[i] = x[i] * 2.f;\n    s += out[i];"), "vectorize").instantiate(
        {"VEC_L0": 4}
    )
    assert "ktx::pack<float, 4> ktx_out;" in text and "ktx::load<4>(out" not in text
    text = apply(src.replace("BODY", "out[i] = out[i] * 2.f;"), "vectorize").instantiate({"VEC_L0": 4})
    assert "auto ktx_out = ktx::load<4>(out + ktx_p * 4);" in text
    # written under a condition and read unconditionally: out stays scalar (its stores are not
    # all in a pack), x is still packed
    t = apply(src.replace("BODY", "if (x[i] > 0.f) out[i] = x[i];\n    s += out[i];"), "vectorize")
    assert remarks(t)[0].startswith("L0: exposed VEC_L0 {1, 2, 4}; packed 1 pointer(s): x")
    assert "ktx_out" not in t.instantiate({"VEC_L0": 4})


def test_a_threads_own_sequential_loops_share_memory_without_a_barrier() -> None:
    """``for (c = 0; c < C; ++c)`` is walked whole by each thread that runs it: packing it does
    not change who touches which element, so a later loop may read what it wrote."""
    src = """\
__global__ void k(float* __restrict__ r, const float* __restrict__ a, float* __restrict__ out, int C) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  float* rr = r + row * C;
  for (int c = 0; c < C; ++c) rr[c] = a[row * C + c] * 2.f;
  float s = 0.f;
  for (int c = 0; c < C; ++c) s += rr[c];
  out[row] = s;
}
"""
    t = apply(src, "vectorize{tie=true}")
    rewritten = [o.site for o in t.outcomes if o.pass_name == "vectorize" and o.status == "rewritten"]
    assert {"L0", "L1"} <= set(rewritten), remarks(t)
    strided = src.replace("int c = 0; c < C; ++c", "int c = threadIdx.x; c < C; c += blockDim.x")
    t = apply(strided, "vectorize{tie=true}")
    assert any("no __syncthreads() in between" in r for r in remarks(t)), remarks(t)


def test_a_running_reduction_read_elsewhere_is_refused_in_a_strided_loop() -> None:
    """``if (x[i] > m) m = x[i]; o[i] = m;``: each thread's running maximum, read at every element;
    packs give threads other elements, so the values written change (found in review). A loop a
    thread walks whole (from 0 by 1) keeps its order under packs and is still rewritten."""
    strided = """\
__global__ void k(float* __restrict__ o, const float* __restrict__ x, int n) {
  float m = -1e30f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    if (x[i] > m) m = x[i];
    o[i] = m;
  }
}
"""
    (first, *_) = remarks(apply(strided, "vectorize"))
    assert "the body reads m, a running reduction, outside its update (line 5)" in first
    own = strided.replace("int i = threadIdx.x; i < n; i += blockDim.x", "int i = 0; i < n; ++i")
    assert remarks(apply(own, "vectorize"))[0].startswith("L0: exposed VEC_L0")
    # `if (m + x[i] > m) m = m + x[i];` is no maximum: a sum whose running value the guard reads
    sum_like = strided.replace("if (x[i] > m) m = x[i];\n    o[i] = m;", "if (m + x[i] > m) m = m + x[i];")
    assert "the body reads m, a running reduction" in remarks(apply(sum_like, "vectorize"))[0]


def test_a_shifted_offset_keeps_its_parentheses_in_the_pack_address() -> None:
    """FasterTransformer's COL32 kernels index ``output[(outIdx << 2) + i]``: ``<<`` binds looser
    than ``+``, so the pack's address must read ``output + (outIdx << 2) + ...`` (written without
    the parentheses it shifted the whole sum and did not build)."""
    src = """\
__global__ void col32(float* __restrict__ out, const float* __restrict__ x, int k) {
  for (int i = 0; i < 4; i++) {
    out[(k << 2) + i] = x[(k << 2) + i] * 2.f;
  }
}
"""
    code = apply(src, "vectorize").instantiate({"VEC_L0": 4})
    assert "ktx::load<4>(x + (k << 2) + ktx_p * 4)" in code
    assert "ktx::store(out + (k << 2) + ktx_p * 4, ktx_out)" in code
