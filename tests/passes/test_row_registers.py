"""row-registers: a row's packs kept in registers between a block's two loops (knob PACKS).

What the facts keep (:mod:`ktx.ir.facts.rowkeep`) in the suite's rmsnorm (the input pack, kept;
the weight, early) and fused_add_rmsnorm (the weight, early), and what they refuse; the default
(PACKS=0) instantiates to the original bytes; the constraint keeps 4 packs off 1024-thread
blocks; every config of both kernels compiles for sm_90 without spills (slow).
"""

from __future__ import annotations

import re

import pytest
from ktx.ir import parse
from ktx.ir.expr import expand
from ktx.ir.facts.rowkeep import row_keep, row_keeps
from passtest import ROOT, apply, remarks

from ktx.measure.compile import CompileRequest, compile_kernel, find_nvcc
from ktx.pipeline import candidate_from_template, template_for_spec
from ktx.specload import load_spec

CONFIG_LINE = re.compile(r"(?m)^// ktx: `[^`]*` instantiated with [^\n]*\n")
KERNELS = {"rmsnorm": "rmsnorm_kernel", "fused_add_rmsnorm": "fused_add_rmsnorm_kernel"}


def _source(stem: str) -> str:
    return (ROOT / "kernels" / stem / "kernel.cu").read_text()


@pytest.mark.parametrize("stem", sorted(KERNELS))
def test_the_facts_keep_the_row_and_load_the_weight_early(stem: str) -> None:
    m = parse(_source(stem))
    keep = row_keep(m, m.kernel(KERNELS[stem]))
    assert not isinstance(keep, str), keep
    got = sorted((ld.variable, ld.kind) for ld in keep.loads)
    # fused_add_rmsnorm's second loop reads x back from its shared-memory stash, which the first
    # loop wrote from the local array x: the array is kept (issue 23: write once, never re-read)
    assert got == (
        [("in", "kept"), ("w", "early")] if stem == "rmsnorm" else [("w", "early"), ("x", "array")]
    )
    assert (keep.var, keep.init, keep.bound, keep.step) == ("i", "thread_id", "num_packs", "num_threads")


def test_a_written_row_or_other_headers_are_refused() -> None:
    src = _source("rmsnorm")
    # the second loop over another range: no pair of loops
    head = "for (int i = thread_id; i < num_packs; i += num_threads) {\n    Pack<T> in, w, o;"
    other = src.replace(head, head.replace("i < num_packs;", "i < num_packs - 1;"))
    assert other != src
    m = parse(other)
    assert isinstance(row_keep(m, m.kernel("rmsnorm_kernel")), str)
    t = apply(other, "row-registers")
    assert not t.knobs and any("no two row loops" in r for r in remarks(t, "skipped")), remarks(t)
    # input without const __restrict__: a write could reach it, nothing is kept from it
    writable = src.replace("const T* __restrict__ input_row", "T* input_row").replace(
        "const T* __restrict__ input,", "T* input,"
    )
    assert writable.count("T* input") == 2
    m = parse(writable)
    keep = row_keep(m, m.kernel("rmsnorm_kernel"))
    assert not isinstance(keep, str) and [ld.variable for ld in keep.loads] == ["w"]


@pytest.mark.parametrize("stem", sorted(KERNELS))
def test_default_is_the_original_and_four_packs_need_small_blocks(stem: str) -> None:
    t = apply(_source(stem), "row-registers")
    assert [k.name for k in t.knobs] == ["PACKS"]
    assert CONFIG_LINE.sub("", t.instantiate({"PACKS": 0}), count=1) == _source(stem)
    assert any(c.startswith("PACKS <= 2 or (32) * ") and c.endswith("<= 512") for c in t.space.constraints)
    two = t.instantiate({"PACKS": 2})
    assert "ktx_keep_w[ktx_k].load(weight + i * VEC);" in two
    assert ("in = ktx_keep_in[ktx_k];" in two) == (stem == "rmsnorm")


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not on PATH")
@pytest.mark.slow
def test_every_config_compiles_for_sm90_without_spills() -> None:
    failed, spills, built = [], [], 0
    for stem in sorted(KERNELS):
        folder = ROOT / "kernels" / stem
        spec = load_spec(folder)
        t = template_for_spec(spec, "row-registers")
        for packs in (1, 2, 4):
            source = candidate_from_template(spec, t, {"PACKS": packs}).source
            flags = (*spec.flags, "-Xptxas", "-v")
            # the name expression with its template arguments, as the harness asks for it: a
            # template kernel is found by its lowered name, never by a demangled head
            name = expand(spec.name_expression, spec.env(spec.shape_set().points[0]))
            r = compile_kernel(CompileRequest(source, name, flags, "90", (str(folder),), "nvcc"))
            built += 1
            if not r.ok:
                failed.append(f"{stem} PACKS={packs}: {r.log[-1500:]}")
            elif re.search(r"[1-9]\d* bytes spill stores", r.log):
                spills.append(f"{stem} PACKS={packs}")
    assert built == 6 and not failed, "\n".join(failed)
    assert not spills, spills


def test_the_heads_loads_are_all_issued_before_any_math() -> None:
    """Issue 23's hand variant loads the row part and the weight in one go, then reduces. The
    pass used to load each pack and do its math before the next guarded load, and the weight
    after the first loop: three memory latencies before the barrier. Now one head issues every
    load (row and weight), and the first loop's head takes the row from registers."""
    two = apply(_source("rmsnorm"), "row-registers").instantiate({"PACKS": 2})
    loads = "ktx_keep_in[ktx_k].load(input_row + i * VEC); ktx_keep_w[ktx_k].load(weight + i * VEC);"
    assert loads in two
    first_math = two.index("sum_sq += x * x;")
    assert two.index(loads) < first_math
    head = two[two.index(loads) : first_math]
    assert "in = ktx_keep_in[ktx_k];" in head and "in.load(" not in head
    # the rows' reads from memory: the prefetch, the rest loop of each of the two loops, the tails
    assert two.count("in.load(input_row") == 2 and two.count("ktx_keep_in[ktx_k].load(") == 1


def test_a_first_loop_that_stores_in_place_has_its_loads_issued_first() -> None:
    """fused_add_rmsnorm's first loop writes the residual pack it read, at the same address, and
    its stash goes to shared memory: no iteration's store reaches another's load (the pointers are
    __restrict__), so the input and residual packs are issued with the weight, ahead of the math,
    as in the hand kernel (benchmarks/norms_hand)."""
    two = apply(_source("fused_add_rmsnorm"), "row-registers").instantiate({"PACKS": 2})
    first = (
        "if (i < num_packs) { ktx_pre_in[ktx_k].load(input_row + i * VEC); "
        "ktx_pre_res[ktx_k].load(residual_row + i * VEC); ktx_keep_w[ktx_k].load(weight + i * VEC); }"
    )
    assert two.count(first) == 1 and two.index(first) < two.index("x[j] = to_float(in.v[j])")
    assert "in = ktx_pre_in[ktx_k];" in two and "res = ktx_pre_res[ktx_k];" in two
    # the rest loop still loads as written
    assert two.count("res.load(residual_row + i * VEC);") == 1
    # the residual stored one pack further on: an iteration's store may be a later one's load
    shifted = _source("fused_add_rmsnorm").replace(
        "res.store(residual_row + i * VEC);", "res.store(residual_row + i * VEC + VEC);", 1
    )
    m = parse(shifted)
    keep = row_keep(m, m.kernel("fused_add_rmsnorm_kernel"))
    assert not isinstance(keep, str) and keep.prefetch == ()
    assert "ktx_pre_" not in apply(shifted, "row-registers").instantiate({"PACKS": 2})


def test_a_first_loop_that_stores_elsewhere_keeps_its_loads_in_place() -> None:
    """A first loop storing to another row (not in place): a pack loaded early could be one an
    earlier iteration stores, so the kept load stays in the loop's body."""
    # a synthetic first loop that keeps its row and stores: the kept load stays in its body
    src = _source("rmsnorm").replace(
        "      sum_sq += x * x;\n    }\n  }",
        "      sum_sq += x * x;\n    }\n    in.store(output_row + i * VEC);\n  }",
        1,
    )
    assert src != _source("rmsnorm")
    stored = apply(src, "row-registers").instantiate({"PACKS": 2})
    assert "in.load(input_row + i * VEC); ktx_keep_in[ktx_k] = in;" in stored
    assert "ktx_keep_in[ktx_k].load(" not in stored


GUARDED = """
template <typename T> struct vec8 {
  T v[8];
  __device__ void fill(float x) { for (int j = 0; j < 8; ++j) v[j] = T(x); }
  __device__ void load(const T* p) { for (int j = 0; j < 8; ++j) v[j] = p[j]; }
  __device__ void store(T* p) const { for (int j = 0; j < 8; ++j) p[j] = v[j]; }
};
__global__ void norm(float* __restrict__ input, float* __restrict__ weight, float* __restrict__ output,
                     const unsigned d) {
  const unsigned thread_id = threadIdx.x, num_threads = blockDim.x;
  const unsigned rounds = (d + 8 * num_threads - 1) / (8 * num_threads);
  __shared__ float total;
  float s = 0.f;
  for (unsigned i = 0; i < rounds; i++) {
    vec8<float> x;
    x.fill(0.f);
    if ((i * num_threads + thread_id) * 8 < d) {
      x.load(input + blockIdx.x * d + (i * num_threads + thread_id) * 8);
    }
    for (int j = 0; j < 8; ++j) s += x.v[j] * x.v[j];
  }
  atomicAdd(&total, s);
  __syncthreads();
  for (unsigned i = 0; i < rounds; i++) {
    vec8<float> x, w, o;
    x.fill(0.f);
    if ((i * num_threads + thread_id) * 8 < d) {
      x.load(input + blockIdx.x * d + (i * num_threads + thread_id) * 8);
      w.load(weight + (i * num_threads + thread_id) * 8);
    }
    for (int j = 0; j < 8; ++j) o.v[j] = x.v[j] * w.v[j] / total;
    if ((i * num_threads + thread_id) * 8 < d) {
      o.store(output + blockIdx.x * d + (i * num_threads + thread_id) * 8);
    }
  }
}
"""


def test_guarded_loads_of_a_restrict_row_only_read_are_kept() -> None:
    """FlashInfer's RMSNormKernel: ``T* __restrict__ input`` (no const, but only read), each pack
    loaded under ``if ((i * num_threads + thread_id) * VEC_SIZE < d)`` in both loops. The row is
    kept and the weight loads early, each prefetch under the same guard."""
    m = parse(GUARDED)
    keep = row_keep(m, m.kernel("norm"))
    assert not isinstance(keep, str), keep
    guard = "((i * num_threads + thread_id) * 8 < d)"
    assert sorted((ld.variable, ld.kind, ld.guard) for ld in keep.loads) == [
        ("w", "early", guard),
        ("x", "kept", guard),
    ]
    two = apply(GUARDED, "row-registers").instantiate({"PACKS": 2})
    row = "input + blockIdx.x * d + (i * num_threads + thread_id) * 8"
    assert f"if {guard} {{ ktx_keep_x[ktx_k].load({row}); }}" in two
    assert f"if {guard} {{ ktx_keep_w[ktx_k].load(weight + (i * num_threads + thread_id) * 8); }}" in two
    assert two.count("x = ktx_keep_x[ktx_k];") == 2 and "w = ktx_keep_w[ktx_k];" in two
    # the row also written (stored through): no longer read-only, nothing is kept from it
    written = GUARDED.replace("o.store(output + blockIdx.x", "o.store(input + blockIdx.x")
    m = parse(written)
    keep = row_keep(m, m.kernel("norm"))
    assert not isinstance(keep, str) and [ld.variable for ld in keep.loads] == ["w"]
    # a guard that differs between the loops: not the same packs; x is then only an early load
    other = GUARDED.replace(
        "if ((i * num_threads + thread_id) * 8 < d) {\n      x.load", "if (i < d) {\n      x.load", 1
    )
    m = parse(other)
    keep = row_keep(m, m.kernel("norm"))
    assert not isinstance(keep, str)
    assert sorted((ld.variable, ld.kind) for ld in keep.loads) == [("w", "early"), ("x", "early")]


def test_the_fused_sum_stays_in_registers_written_once_never_read_back() -> None:
    """Issue 23: fused_add_rmsnorm writes x + residual and the second loop read it back from its
    shared-memory stash. The first loop's head now copies the local array into a keep slot right
    after the stash, and the second loop's head takes it from there: no ld.shared of the stash in
    the heads (the stash store stays, so the rest loop and the tail read what they always read)."""
    two = apply(_source("fused_add_rmsnorm"), "row-registers").instantiate({"PACKS": 2})
    assert "float ktx_keep_x[2][VEC];" in two
    stash = "make_float4(x[j], x[j + 1], x[j + 2], x[j + 3]);\n    }"
    copy_in = "for (int ktx_j = 0; ktx_j < (VEC); ++ktx_j) ktx_keep_x[ktx_k][ktx_j] = x[ktx_j];"
    copy_out = "for (int ktx_j = 0; ktx_j < (VEC); ++ktx_j) x[ktx_j] = ktx_keep_x[ktx_k][ktx_j];"
    assert two.count(copy_in) == 1 and two.count(copy_out) == 1
    assert two.index(copy_in) < two.index("__syncthreads()") < two.index(copy_out)
    # the second head reads no stash; only the rest loop and the scalar tail still do
    head = two[two.index("// Pass 2") : two.index(copy_out) + 400]
    assert "reinterpret_cast<const float4*>(smem_x" not in head
    assert two.count("reinterpret_cast<const float4*>(smem_x + i * VEC + j)") == 1
    # and the first head stashes nothing: nothing reads those elements back (session 11); the
    # rest loop still stashes what its own second loop reads
    assert two.count(stash) == 1 and two.index(copy_in) < two.index(stash)


def test_a_stash_read_elsewhere_keeps_its_store_in_the_head() -> None:
    """The head leaves the stash store out only where nothing but the second loop's fill (now
    from registers) and the scalar tails past the packs read the stash: one more reader of
    ``smem_x`` (here after both loops) and the head stashes as written."""
    src = _source("fused_add_rmsnorm")
    anchor = "  // Pass 2:"
    assert anchor in src
    extra = src.replace(anchor, "  const float peek = smem_x[1];\n" + anchor, 1)
    m = parse(extra)
    keep = row_keep(m, m.kernel("fused_add_rmsnorm_kernel"))
    assert not isinstance(keep, str)
    (arr,) = [ld for ld in keep.loads if ld.kind == "array"]
    assert not arr.dead_stash
    two = apply(extra, "row-registers").instantiate({"PACKS": 2})
    stash = "make_float4(x[j], x[j + 1], x[j + 2], x[j + 3]);\n    }"
    assert two.count(stash) == 2, "head and rest loop both stash"
    m = parse(src)
    keep = row_keep(m, m.kernel("fused_add_rmsnorm_kernel"))
    assert not isinstance(keep, str) and [ld.dead_stash for ld in keep.loads if ld.kind == "array"] == [True]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("  const float rms_rcp = rsqrtf(", "  smem_x[thread_id] = 0.f;\n  const float rms_rcp = rsqrtf("),
        # a tail that starts one element inside the packs overwrites the last pack's stash
        (
            "for (int i = num_packs * VEC + thread_id; i < d; i += num_threads) {\n    const float x =",
            "for (int i = num_packs * VEC - 1 + thread_id; i < d; i += num_threads) {\n    const float x =",
        ),
    ],
    ids=["write-between", "tail-inside-the-packs"],
)
def test_a_stash_written_between_the_loops_is_not_forwarded(old: str, new: str) -> None:
    """A write through the stash pointer between the loops (other than the scalar tail that
    starts past the packs, ``num_packs * VEC + ...``) could change what the second loop reads:
    the array is not kept."""
    src = _source("fused_add_rmsnorm")
    clobber = src.replace(old, new, 1)
    assert clobber != src
    m = parse(clobber)
    keep = row_keep(m, m.kernel("fused_add_rmsnorm_kernel"))
    assert not isinstance(keep, str) and [(ld.variable, ld.kind) for ld in keep.loads] == [("w", "early")]


STORED = """
template <typename T, int N> struct vec_t {
  T v[N];
  __device__ void fill(float x) { for (int j = 0; j < N; ++j) v[j] = T(x); }
  __device__ void load(const T* p) { for (int j = 0; j < N; ++j) v[j] = p[j]; }
  __device__ void store(T* p) const { for (int j = 0; j < N; ++j) p[j] = v[j]; }
};
__global__ void fused(float* __restrict__ input, float* __restrict__ residual, float* __restrict__ weight,
                      const unsigned d) {
  const unsigned thread_id = threadIdx.x, num_threads = blockDim.x;
  const unsigned rounds = (d + 8 * num_threads - 1) / (8 * num_threads);
  extern __shared__ float smem[];
  float* smem_x = smem + 32;
  float s = 0.f;
  for (unsigned i = 0; i < rounds; i++) {
    vec_t<float, 8> a, r;
    vec_t<float, 8> x_vec;
    a.fill(0.f);
    r.fill(0.f);
    if ((i * num_threads + thread_id) * 8 < d) {
      a.load(input + blockIdx.x * d + (i * num_threads + thread_id) * 8);
      r.load(residual + blockIdx.x * d + (i * num_threads + thread_id) * 8);
    }
    for (int j = 0; j < 8; ++j) { x_vec.v[j] = a.v[j] + r.v[j]; s += x_vec.v[j] * x_vec.v[j]; }
    if ((i * num_threads + thread_id) * 8 < d) {
      x_vec.store(residual + blockIdx.x * d + (i * num_threads + thread_id) * 8);
      x_vec.store(smem_x + (i * num_threads + thread_id) * 8);
    }
  }
  smem[thread_id % 32] = s;
  __syncthreads();
  for (unsigned i = 0; i < rounds; i++) {
    vec_t<float, 8> x_vec, w, o;
    x_vec.fill(0.f);
    if ((i * num_threads + thread_id) * 8 < d) {
      w.load(weight + (i * num_threads + thread_id) * 8);
      x_vec.load(smem_x + (i * num_threads + thread_id) * 8);
    }
    for (int j = 0; j < 8; ++j) o.v[j] = x_vec.v[j] * w.v[j] / smem[0];
    if ((i * num_threads + thread_id) * 8 < d) {
      o.store(input + blockIdx.x * d + (i * num_threads + thread_id) * 8);
    }
  }
}
"""


def test_a_pack_stored_by_the_first_loop_is_forwarded_to_the_second() -> None:
    """FlashInfer's FusedAddRMSNormKernel form: ``x_vec.store(smem_x + A)`` in the first loop,
    ``x_vec.load(smem_x + A)`` under the same guard in the second: the stored pack is kept."""
    m = parse(STORED)
    keep = row_keep(m, m.kernel("fused"))
    assert not isinstance(keep, str), keep
    assert sorted((ld.variable, ld.kind) for ld in keep.loads) == [("w", "early"), ("x_vec", "stored")]
    two = apply(STORED, "row-registers").instantiate({"PACKS": 2})
    assert "x_vec.store(smem_x + (i * num_threads + thread_id) * 8); ktx_keep_x_vec[ktx_k] = x_vec;" in two
    assert "x_vec = ktx_keep_x_vec[ktx_k];" in two
    # the stash written between the loops: nothing forwarded
    m = parse(STORED.replace("  smem[thread_id % 32] = s;", "  smem_x[thread_id] = s;"))
    keep = row_keep(m, m.kernel("fused"))
    assert not isinstance(keep, str) and [ld.kind for ld in keep.loads] == ["early"]


def test_a_refusal_names_the_loops_or_the_call_that_holds_them() -> None:
    """The real-code row kernels row-registers refuses must say which construct and line: loops of
    one header in two branches (exllamav2's rms_norm_kernel) are not a pair, and a kernel whose
    loops live in a __device__ function it calls (apex's cuApplyRMSNorm) has none of its own."""
    branches = """
__global__ void k(float* __restrict__ y, const float* __restrict__ x, bool f) {
  float s = 0.f, v[4];
  if (f) {
    for (int i = 0; i < 4; i++) { v[i] = x[threadIdx.x + 32 * i]; s += v[i]; }
  } else {
    for (int j = 0; j < 4; j++) { v[j] = 2.f * x[threadIdx.x + 32 * j]; s += v[j]; }
  }
  __syncthreads();
  if (f) {
    for (int i = 0; i < 4; i++) y[threadIdx.x + 32 * i] = v[i] / s;
  }
}
"""
    m = parse(branches)
    why = row_keeps(m, m.kernel("k"))
    assert isinstance(why, str)
    assert "line 5 `for (int i = 0; i < 4; i++)` in the block at line 4" in why, why
    assert "line 11 `for (int i = 0; i < 4; i++)` in the block at line 10" in why, why
    called = """
__device__ void body(float* y, const float* x) {
  for (int i = threadIdx.x; i < 64; i += blockDim.x) y[i] = x[i];
}
__global__ void k(float* __restrict__ y, const float* __restrict__ x) {
  body(y, x);
}
"""
    m = parse(called)
    why = row_keeps(m, m.kernel("k"))
    assert isinstance(why, str) and "no loop of its own: it calls body at line 6" in why, why
