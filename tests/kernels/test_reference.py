"""The float64 references in kernels/*/reference.py, checked on small hand-computed cases."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from ._suite import KERNEL_NAMES, load_reference

Reference = Callable[..., dict[str, np.ndarray]]


def load(name: str) -> Any:
    return load_reference(name)


def ref(name: str) -> Reference:
    fn: Reference = load(name).reference
    return fn


@pytest.mark.parametrize("name", KERNEL_NAMES)
def test_every_kernel_has_a_reference(name: str) -> None:
    assert callable(load(name).reference)


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def test_silu_and_mul() -> None:
    # one token, d = 2: x = [0, 1], y = [2, 3]
    out = ref("silu_and_mul")(input=np.array([[0.0, 1.0, 2.0, 3.0]], dtype=np.float32), d=2)["out"]
    assert out.shape == (1, 2)
    assert out.dtype == np.float64
    assert out[0, 0] == 0.0
    assert out[0, 1] == pytest.approx(3.0 * sigmoid(1.0), rel=1e-15)  # 2.1931757358900...
    assert out[0, 1] == pytest.approx(2.19317573589, abs=1e-10)
    # negative gate: silu(-2) * 1 = -2 * sigmoid(-2)
    out = ref("silu_and_mul")(input=np.array([[-2.0, 1.0]], dtype=np.float32))["out"]
    assert out[0, 0] == pytest.approx(-0.238405844, abs=1e-9)


def test_rmsnorm() -> None:
    # row [3, 4]: mean square 12.5, rsqrt = 1/sqrt(12.5) = 0.28284271...
    out = ref("rmsnorm")(input=np.array([[3.0, 4.0]]), weight=np.array([1.0, 2.0]), eps=0.0, d=2)["output"]
    r = 1.0 / math.sqrt(12.5)
    np.testing.assert_allclose(out[0], [3.0 * r, 8.0 * r], rtol=1e-15)
    np.testing.assert_allclose(out[0], [0.848528137, 2.262741700], atol=1e-9)
    # eps keeps an all-zero row finite
    zeros = ref("rmsnorm")(input=np.zeros((1, 2)), weight=np.ones(2), eps=1e-6)["output"]
    np.testing.assert_array_equal(zeros, 0.0)


def test_fused_add_rmsnorm() -> None:
    res = ref("fused_add_rmsnorm")(
        input=np.array([[1.0, 2.0]]),
        residual=np.array([[2.0, 2.0]]),
        weight=np.array([1.0, 2.0]),
        eps=0.0,
    )
    np.testing.assert_array_equal(res["residual"], [[3.0, 4.0]])
    np.testing.assert_allclose(res["input"], [[0.848528137, 2.262741700]], atol=1e-9)
    # eps enters inside the square root: [1, 1] with eps = 3 -> 1 / sqrt(1 + 3) = 0.5
    res = ref("fused_add_rmsnorm")(
        input=np.array([[1.0, 0.5]]), residual=np.array([[0.0, 0.5]]), weight=np.ones(2), eps=3.0
    )
    np.testing.assert_allclose(res["input"], [[0.5, 0.5]], rtol=1e-15)


def test_moe_sum() -> None:
    x = np.array([[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], [[-1.0, 0.5], [1.0, 0.25], [0.0, 0.25]]])
    out = ref("moe_sum")(input=x)["out"]
    np.testing.assert_array_equal(out, [[9.0, 12.0], [0.0, 1.0]])
    flat = ref("moe_sum")(input=x.reshape(2, 6), d=2, TOPK=3)["out"]
    np.testing.assert_array_equal(flat, out)


def test_merge_attn_states() -> None:
    # 2 tokens, 1 head, head_size 2. LSE layout [heads, tokens].
    p_out = np.array([[[1.0, 2.0]], [[1.0, 2.0]]])
    s_out = np.array([[[5.0, 6.0]], [[5.0, 6.0]]])
    p_lse = np.array([[0.0, 2.0]])
    s_lse = np.array([[math.log(3.0), 2.0]])
    res = ref("merge_attn_states")(
        prefix_output=p_out, prefix_lse=p_lse, suffix_output=s_out, suffix_lse=s_lse
    )
    # token 0: weights 1/4, 3/4; token 1: equal LSEs -> 1/2, 1/2
    np.testing.assert_allclose(res["output"][0, 0], [4.0, 5.0], rtol=1e-15)
    np.testing.assert_allclose(res["output"][1, 0], [3.0, 4.0], rtol=1e-15)
    np.testing.assert_allclose(res["output_lse"], [[math.log(4.0), 2.0 + math.log(2.0)]])
    assert res["output_lse"].shape == (1, 2)


def test_merge_attn_states_infinities() -> None:
    p_out = np.array([[[1.0, 2.0]], [[1.0, 2.0]], [[1.0, 2.0]]])
    s_out = np.array([[[5.0, 6.0]], [[5.0, 6.0]], [[5.0, 6.0]]])
    # token 0: prefix +inf counts as empty -> suffix wins; token 1: suffix -inf -> prefix wins;
    # token 2: both empty -> copy of prefix, LSE -inf, no NaN.
    p_lse = np.array([[np.inf, 1.5, -np.inf]])
    s_lse = np.array([[0.5, -np.inf, np.inf]])
    res = ref("merge_attn_states")(
        prefix_output=p_out, prefix_lse=p_lse, suffix_output=s_out, suffix_lse=s_lse
    )
    np.testing.assert_array_equal(res["output"][:, 0], [[5.0, 6.0], [1.0, 2.0], [1.0, 2.0]])
    np.testing.assert_array_equal(res["output_lse"], [[0.5, 1.5, -np.inf]])
    assert not np.isnan(res["output"]).any()


def test_round_e4m3() -> None:
    round_e4m3 = load("per_token_group_quant_fp8").round_e4m3
    vals = np.array([0.0, 1.0, 1.0625, 1.1, 17.0, 19.0, 448.0, 500.0, -3.3, 2.0**-9, 2.0**-10])
    # 1.0625 is a tie between 1.0 and 1.125 -> even (1.0); 17 ties 16/18 -> 16; 19 ties 18/20
    # -> 20; -3.3 -> -3.25; 2^-9 is the smallest subnormal, 2^-10 ties 0/2^-9 -> 0.
    expect = [0.0, 1.0, 1.0, 1.125, 16.0, 20.0, 448.0, 448.0, -3.25, 2.0**-9, 0.0]
    np.testing.assert_array_equal(round_e4m3(vals), expect)


def test_per_token_group_quant_fp8() -> None:
    # one token, two groups of 4: group 0 absmax 896 -> scale 2; group 1 all zero -> eps / 448
    x = np.array([[896.0, -34.0, 3.0, 0.5, 0.0, 0.0, 0.0, 0.0]])
    mod = load("per_token_group_quant_fp8")
    res = mod.reference(input=x, group_size=4, eps=1e-10)
    np.testing.assert_allclose(res["output_s"], [[2.0, 1e-10 / 448.0]], rtol=1e-15)
    assert res["output_s"].shape == (1, 2)
    np.testing.assert_array_equal(res["output_q"][0], [448.0, -17.0, 1.5, 0.25, 0, 0, 0, 0])
    # on the e4m3 grid, -17 ties -16/-18 and goes to the even mantissa, -16
    np.testing.assert_array_equal(mod.round_e4m3(res["output_q"])[0], [448.0, -16.0, 1.5, 0.25, 0, 0, 0, 0])
    # min/max clamp, and the ktx.toml entry point (inputs by name, shape vars)
    res = mod.per_token_group_quant(
        {"input": np.array([[10.0, -10.0]]), "eps": 1e-10, "min_8bit": -100.0, "max_8bit": 100.0},
        {"group_size": 2, "tokens": 1, "hidden": 2},
    )
    np.testing.assert_array_equal(res["output_q"], [[100.0, -100.0]])
    np.testing.assert_allclose(res["output_s"], [[0.1]], rtol=1e-15)


@pytest.mark.parametrize("name", KERNEL_NAMES)
def test_toml_entry_point_matches_reference(name: str) -> None:
    """Each reference.py also offers ``<entry>(inputs, shape)``, the form ktx.toml names."""
    mod = load(name)
    entry = "per_token_group_quant" if name == "per_token_group_quant_fp8" else name
    assert callable(getattr(mod, entry)), f"{name}: no {entry}(inputs, shape)"


def test_rope_neox_and_gptj() -> None:
    # head_size 4, rot_dim 4 (half 2). Cache row 1: cos = [0, 1], sin = [1, 0].
    cache = np.array([[1.0, 1.0, 0.0, 0.0], [0.0, 1.0, 1.0, 0.0]])
    q = np.array([[[1.0, 2.0, 3.0, 4.0]]])  # 1 token, 1 head
    k = np.array([[[1.0, 0.0, 0.0, 1.0]]])
    res = ref("rope")(positions=np.array([1]), query=q, key=k, cos_sin_cache=cache, rot_dim=4, head_size=4)
    # NeoX pairs (h0, h2) with c=0,s=1 -> (-3, 1); (h1, h3) with c=1,s=0 -> unchanged.
    np.testing.assert_array_equal(res["query"], [[[-3.0, 2.0, 1.0, 4.0]]])
    np.testing.assert_array_equal(res["key"], [[[0.0, 0.0, 1.0, 1.0]]])
    res = ref("rope")(
        positions=np.array([1]),
        query=q,
        cos_sin_cache=cache,
        rot_dim=4,
        head_size=4,
        IS_NEOX=False,
    )
    # GPT-J pairs (h0, h1) with c=0,s=1 -> (-2, 1); (h2, h3) with c=1,s=0 -> unchanged.
    np.testing.assert_array_equal(res["query"], [[[-2.0, 1.0, 3.0, 4.0]]])
    assert "key" not in res
    # position 0 is the identity; partial rotary (rot_dim 2 < head_size 4) leaves h2, h3 alone
    ident = ref("rope")(positions=np.array([0]), query=q, cos_sin_cache=cache, rot_dim=4, head_size=4)
    np.testing.assert_array_equal(ident["query"], q)
    partial = ref("rope")(
        positions=np.array([0]),
        query=q,
        cos_sin_cache=np.array([[0.0, 1.0]]),
        rot_dim=2,
        head_size=4,
    )
    np.testing.assert_array_equal(partial["query"], [[[-2.0, 1.0, 3.0, 4.0]]])
