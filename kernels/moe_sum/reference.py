"""float64 reference for moe_sum (numpy)."""

from collections.abc import Mapping
from typing import Any

from collections.abc import Mapping
from typing import Any

import numpy as np


def moe_sum(inputs: Mapping[str, Any], shape: Mapping[str, int]) -> dict[str, np.ndarray]:
    return {"out": np.sum(inputs["input"], axis=1)}


def moe_sum(inputs: Mapping[str, Any], shape: Mapping[str, int]) -> dict[str, np.ndarray]:
    """ktx.toml entry point (``reference:moe_sum``): inputs by parameter name, shape vars."""
    return reference(**{**shape, **inputs})
