"""float64 reference for merge_attn_states (merge two partial attention outputs by their LSE).

An LSE of +inf counts as -inf (that side is empty). When both sides are empty the kernel copies
prefix_output and writes output_lse = -inf; this reference does the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np


def reference(
    *,
    prefix_output: np.ndarray,
    prefix_lse: np.ndarray,
    suffix_output: np.ndarray,
    suffix_lse: np.ndarray,
    num_tokens: int | None = None,
    num_heads: int | None = None,
    head_size: int | None = None,
    **_: object,
) -> dict[str, np.ndarray]:
    """Values [num_tokens, num_heads, head_size], LSEs [num_heads, num_tokens].

    Returns {"output": [num_tokens, num_heads, head_size], "output_lse": [num_heads, num_tokens]}.
    """
    p_out = np.asarray(prefix_output, dtype=np.float64)
    s_out = np.asarray(suffix_output, dtype=np.float64)
    if num_tokens is None or num_heads is None or head_size is None:
        num_tokens, num_heads, head_size = p_out.shape[-3:]
    nt, nh, hs = int(num_tokens), int(num_heads), int(head_size)
    p_out = p_out.reshape(nt, nh, hs)
    s_out = s_out.reshape(nt, nh, hs)
    # [heads, tokens] -> [tokens, heads]
    p_lse = np.asarray(prefix_lse, dtype=np.float64).reshape(nh, nt).T.copy()
    s_lse = np.asarray(suffix_lse, dtype=np.float64).reshape(nh, nt).T.copy()
    p_lse[np.isinf(p_lse)] = -np.inf
    s_lse[np.isinf(s_lse)] = -np.inf
    m = np.maximum(p_lse, s_lse)
    empty = np.isinf(m)
    m_safe = np.where(empty, 0.0, m)
    with np.errstate(invalid="ignore", over="ignore"):
        p = np.where(empty, 1.0, np.exp(p_lse - m_safe))
        s = np.where(empty, 0.0, np.exp(s_lse - m_safe))
    total = p + s
    out = (p[..., None] * p_out + s[..., None] * s_out) / total[..., None]
    out_lse = np.where(empty, -np.inf, np.log(total) + m_safe)
    return {"output": out, "output_lse": out_lse.T.copy()}


def merge_attn_states(inputs: Mapping[str, Any], shape: Mapping[str, int]) -> dict[str, np.ndarray]:
    """ktx.toml entry point (``reference:merge_attn_states``): inputs by parameter name, shapes."""
    return reference(**{**shape, **inputs})
