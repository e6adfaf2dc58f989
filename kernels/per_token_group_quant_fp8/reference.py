"""float64 reference for per_token_group_quant_fp8 (numpy).

Returns the quantised values as floats; the harness rounds them to fp8 e4m3 (nearest even,
saturating) before comparing codes within the spec's ulp tolerance.
"""

from collections.abc import Mapping
from typing import Any

from collections.abc import Mapping
from typing import Any

import numpy as np


def per_token_group_quant(inputs: Mapping[str, Any], shape: Mapping[str, int]) -> dict[str, np.ndarray]:
    group = shape["group_size"]
    x = inputs["input"]
    groups = x.reshape(-1, group)
    absmax = np.maximum(np.abs(groups).max(axis=1), inputs["eps"])
    scale = absmax / inputs["max_8bit"]
    q = np.clip(groups / scale[:, None], inputs["min_8bit"], inputs["max_8bit"])
    return {"output_q": q.reshape(x.shape), "output_s": scale.reshape(x.shape[0], -1)}


def per_token_group_quant_fp8(
    inputs: Mapping[str, Any], shape: Mapping[str, int]
) -> dict[str, np.ndarray]:
    """ktx.toml entry point (``reference:per_token_group_quant_fp8``): inputs by name, shapes."""
    return reference(**{**shape, **inputs})
