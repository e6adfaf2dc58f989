"""float64 reference for merge_attn_states (numpy)."""

from collections.abc import Mapping
from typing import Any

from collections.abc import Mapping
from typing import Any

import numpy as np


def merge_attn_states(inputs: Mapping[str, Any], shape: Mapping[str, int]) -> dict[str, np.ndarray]:
    # LSE is [heads, tokens]; values are [tokens, heads, head_dim].
    p_lse = np.where(np.isinf(inputs["prefix_lse"]), -np.inf, inputs["prefix_lse"]).T
    s_lse = np.where(np.isinf(inputs["suffix_lse"]), -np.inf, inputs["suffix_lse"]).T
    m = np.maximum(p_lse, s_lse)
    empty = np.isinf(m)
    m_safe = np.where(empty, 0.0, m)
    p = np.where(empty, 1.0, np.exp(p_lse - m_safe))
    s = np.where(empty, 0.0, np.exp(s_lse - m_safe))
    total = p + s
    out = (p[..., None] * inputs["prefix_output"] + s[..., None] * inputs["suffix_output"]) / total[
        ..., None
    ]
    lse = np.where(empty, -np.inf, np.log(total) + m_safe)
    return {"output": out, "output_lse": lse.T}


def merge_attn_states(inputs: Mapping[str, Any], shape: Mapping[str, int]) -> dict[str, np.ndarray]:
    """ktx.toml entry point (``reference:merge_attn_states``): inputs by parameter name, shape vars."""
    return reference(**{**shape, **inputs})
