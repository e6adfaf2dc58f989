"""The scalar baselines (act_and_mul_scalar, moe_sum_scalar) compute what their production forms do.

Their float64 references are checked by hand here, and against the production kernels'
references, so the vectorize evidence compares like with like.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ._suite import KERNELS_DIR, load_reference


def test_act_and_mul_scalar_reference() -> None:
    ref = load_reference("act_and_mul_scalar").reference
    out = ref(input=np.array([[0.0, 1.0, 2.0, 3.0]]), d=2)["out"]
    assert out[0, 0] == 0.0
    assert out[0, 1] == pytest.approx(3.0 / (1.0 + math.exp(-1.0)), rel=1e-15)
    x = np.random.default_rng(0).standard_normal((3, 2 * 7))
    prod = load_reference("silu_and_mul").reference(input=x, d=7)["out"]
    np.testing.assert_array_equal(ref(input=x, d=7)["out"], prod)


def test_moe_sum_scalar_reference() -> None:
    ref = load_reference("moe_sum_scalar").reference
    x = np.arange(2 * 3 * 4, dtype=np.float64).reshape(2, 3, 4)
    np.testing.assert_array_equal(ref(input=x)["out"], x.sum(axis=1))
    np.testing.assert_array_equal(ref(input=x.reshape(2, 12), d=4, topk=3)["out"], x.sum(axis=1))
    prod = load_reference("moe_sum").reference(input=x)["out"]
    np.testing.assert_array_equal(ref(input=x)["out"], prod)


@pytest.mark.parametrize("name", ["act_and_mul_scalar", "moe_sum_scalar"])
def test_one_element_per_thread_per_iteration(name: str) -> None:
    """The baselines stay scalar: no packs, no reinterpret_cast, the plain block-stride loop."""
    source = (KERNELS_DIR / name / "kernel.cu").read_text()
    body = source[source.index("__global__") : source.rindex("#ifndef __CUDACC_RTC__")]
    assert "reinterpret_cast" not in body and "Pack" not in body
    assert "+= blockDim.x)" in body
