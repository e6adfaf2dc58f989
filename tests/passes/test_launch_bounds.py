"""launch-bounds: MIN_BLOCKS, with block-size added when missing."""

from __future__ import annotations

from passtest import apply, remarks, suite_source

SRC = """\
__global__ void __launch_bounds__(256, 2) k(float* x, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] = 0.f;
}
"""


def test_requires_block_size_and_constrains_threads_per_sm() -> None:
    t = apply(suite_source("silu_and_mul"), "launch-bounds")
    assert [k.name for k in t.knobs] == ["BLOCK_X", "MIN_BLOCKS"]
    assert t.trace.steps[0].reason == "required by launch-bounds"
    assert "__launch_bounds__(KTX_BLOCK_X, KTX_MIN_BLOCKS)" in t.source
    assert t.space.constraints == ("MIN_BLOCKS == 0 or BLOCK_X > 0", "MIN_BLOCKS * BLOCK_X <= 2048")
    assert "__launch_bounds__(512, 4)" in t.instantiate({"BLOCK_X": 512, "MIN_BLOCKS": 4})
    assert "__launch_bounds__" not in t.instantiate()
    assert not t.space.feasible({"BLOCK_X": 1024, "MIN_BLOCKS": 3})
    assert not t.space.feasible({"BLOCK_X": 0, "MIN_BLOCKS": 2})


def test_an_existing_minimum_is_the_default() -> None:
    t = apply(SRC, "launch-bounds")
    knob = next(k for k in t.knobs if k.name == "MIN_BLOCKS")
    assert knob.default == 2
    assert "__launch_bounds__(256, 2) k" in t.instantiate()


def test_skipped_when_block_size_was() -> None:
    t = apply(suite_source("per_token_group_quant_fp8"), "launch-bounds")
    assert t.knobs == ()
    assert remarks(t)[-1].startswith("per_token_group_quant_8bit_kernel: the kernel has no __launch_bounds__")
