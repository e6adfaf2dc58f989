"""cache-hints: load and store policies per parameter and per helper; read-only legality."""

from __future__ import annotations

from passtest import apply, remarks, suite_source
from semantic import APPLIES, build, load, spec_dirs

SRC = """\
__global__ void k(float* __restrict__ out, const float* __restrict__ x, const float* __restrict__ w, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    out[i] = x[i] * w[i % 8];
  }
}
"""


def test_knobs_per_parameter() -> None:
    t = apply(SRC, "cache-hints")
    assert [(k.name, k.values, k.default) for k in t.knobs] == [
        ("CACHE_LD_X", (0, 1, 2, 3), 0),
        ("CACHE_LD_W", (0, 1, 2, 3), 0),
        ("CACHE_ST_OUT", (0, 1), 0),
    ]
    out = t.instantiate({"CACHE_LD_X": 1, "CACHE_LD_W": 3, "CACHE_ST_OUT": 1})
    assert "ktx::st<1>(&out[i], ktx::ld<1>(&x[i]) * ktx::ld<3>(&w[i % 8]));" in out
    assert "ktx::st<0>(&out[i], ktx::ld<0>(&x[i]) * ktx::ld<0>(&w[i % 8]));" in t.instantiate()


def test_memory_the_kernel_writes_never_takes_the_read_only_path() -> None:
    src = SRC.replace("out[i] = x[i] * w[i % 8];", "out[i] = out[i] * w[i % 8];")
    t = apply(src, "cache-hints")
    assert "out:load: loads of out: the kernel writes it" in remarks(t)
    assert [k.name for k in t.knobs] == ["CACHE_LD_W", "CACHE_ST_OUT"]
    loose = SRC.replace("const float* __restrict__ w", "const float* w")
    assert "w:load: loads of w: not __restrict__, and the kernel writes out, which may alias it" in remarks(
        apply(loose, "cache-hints")
    )
    mutable = SRC.replace("const float* __restrict__ w", "float* __restrict__ w")
    assert "w:load: loads of w: not declared const" in remarks(apply(mutable, "cache-hints"))


def test_helpers_get_their_own_knob() -> None:
    t = apply(suite_source("silu_and_mul"), "cache-hints")
    names = [k.name for k in t.knobs]
    assert names == ["CACHE_LD_INPUT", "CACHE_ST_OUT", "CACHE_LD_PACK_LOAD", "CACHE_ST_PACK_STORE"]
    out = t.instantiate({"CACHE_LD_PACK_LOAD": 2, "CACHE_ST_PACK_STORE": 1})
    assert "*reinterpret_cast<uint4*>(v) = ktx::load_word<2>(reinterpret_cast<const uint4*>(ptr));" in out
    assert "ktx::store_word<1>(reinterpret_cast<uint4*>(ptr), *reinterpret_cast<const uint4*>(v));" in out


def test_helper_loads_of_written_memory_are_refused() -> None:
    t = apply(suite_source("fused_add_rmsnorm"), "cache-hints")
    assert "Pack::load:load: loads in Pack::load() reads residual (the kernel writes it)" in remarks(t)
    assert "CACHE_LD_PACK_LOAD" not in [k.name for k in t.knobs]


def test_packed_accesses_from_vectorize_get_the_hint() -> None:
    t = build(load("act_and_mul_scalar"), "vectorize,cache-hints")
    out = t.instantiate({"VEC_L0": 8, "CACHE_LD_INPUT": 3, "CACHE_ST_OUT": 1})
    assert "ktx::load<8, 3>(x_row + ktx_p * 8)" in out
    assert "ktx::store<1>(out_row + ktx_p * 8, ktx_out_row);" in out
    assert "to_float(ktx::ld<3>(&x_row[i]))" in out  # the scalar tail too


def test_options() -> None:
    assert [k.name for k in apply(SRC, "cache-hints{stores=false}").knobs] == ["CACHE_LD_X", "CACHE_LD_W"]
    assert [k.name for k in apply(SRC, "cache-hints{loads=false}").knobs] == ["CACHE_ST_OUT"]


def test_applies_where_pinned() -> None:
    found = {p.name for p in spec_dirs() if build(load(p.name), "cache-hints").knobs}
    assert found == APPLIES["cache-hints"]


def test_an_address_stays_an_address_and_volatile_stays_as_written() -> None:
    # found by the sweep on foreign code: `&(p[i])` became `&(ktx::ld<...>(...))`, and a store
    # through a `volatile int*` lost its qualifier in the hint's cast; neither built
    src = """\
__global__ void k(float* __restrict__ out, const float* __restrict__ in, volatile int* flag, float** slots,
                  int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    slots[0] = &(out[i]);
    out[i] = in[i] * 2.f;
    flag[i] = 1;
  }
}
"""
    t = apply(src, "cache-hints")
    text = t.instantiate()
    assert "slots[0] = &(out[i]);" in text
    assert "flag[i] = 1;" in text
    why = "flag:volatile: flag is a volatile pointer (line 1): its accesses keep their cache policy"
    assert why in remarks(t)
    assert [k.name for k in t.knobs] == ["CACHE_LD_IN", "CACHE_ST_OUT"]
