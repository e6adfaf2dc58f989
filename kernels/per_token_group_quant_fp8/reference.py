"""float64 reference for per_token_group_quant_fp8 (SGLang's per_token_group_quant_8bit).

Per group of group_size contiguous elements: scale = max(absmax, eps) / max_8bit (eps seeds the
running absmax, as in SGLang); q = clamp(x / scale, min_8bit, max_8bit). "output_q" is q before
the fp8 rounding, as float64: the harness (or ``round_e4m3`` below) rounds it to e4m3 (nearest
even, saturating). The kernel divides in fp32, so a value on a rounding tie may land one e4m3
step away from round_e4m3(output_q).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

E4M3_MAX = 448.0


def round_e4m3(v: np.ndarray) -> np.ndarray:
    """Round float64 values to fp8 e4m3fn (RNE, saturating at +-448), returned as float64."""
    v = np.asarray(v, dtype=np.float64)
    a = np.abs(v)
    _, ex = np.frexp(a)  # a = m * 2**ex, m in [0.5, 1)
    e = np.maximum(ex - 1, -6)  # normal exponent; subnormals share 2**-6's quantum
    quantum = np.ldexp(1.0, e - 3)  # 3 mantissa bits
    r = np.round(a / quantum) * quantum  # np.round is round-half-to-even
    r = np.minimum(r, E4M3_MAX)
    return np.where(a == 0, 0.0, np.copysign(r, v))


def reference(
    *,
    input: np.ndarray,
    group_size: int = 128,
    eps: float = 1e-10,
    min_8bit: float = -E4M3_MAX,
    max_8bit: float = E4M3_MAX,
    **_: object,
) -> dict[str, np.ndarray]:
    """input [num_tokens, hidden] -> output_q [num_tokens, hidden], output_s [num_tokens, groups]."""
    x = np.asarray(input, dtype=np.float64)
    gs = int(group_size)
    groups = x.reshape(-1, gs)
    absmax = np.maximum(np.max(np.abs(groups), axis=1), float(eps))
    scale = absmax / float(max_8bit)
    q = np.clip(groups / scale[:, None], float(min_8bit), float(max_8bit))
    lead = x.shape[:-1] if x.ndim > 1 else (1,)
    return {
        "output_q": q.reshape(x.shape),
        "output_s": scale.reshape((*lead, x.shape[-1] // gs)),
    }


def per_token_group_quant(
    inputs: Mapping[str, Any], shape: Mapping[str, int]
) -> dict[str, np.ndarray]:
    """ktx.toml entry point (``reference:per_token_group_quant``): inputs by name, shape vars."""
    return reference(**{**shape, **inputs})


per_token_group_quant_fp8 = per_token_group_quant
