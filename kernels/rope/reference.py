"""float64 reference for rope (rotary embedding of query and key with a cos/sin cache)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np


def _rotate(
    x: np.ndarray, cos: np.ndarray, sin: np.ndarray, rot_dim: int, is_neox: bool
) -> np.ndarray:
    # x [tokens, heads, head_size]; cos, sin [tokens, rot_dim // 2]
    out = x.copy()
    half = rot_dim // 2
    if is_neox:
        xi, yi = np.arange(half), half + np.arange(half)
    else:
        xi, yi = 2 * np.arange(half), 2 * np.arange(half) + 1
    c, s = cos[:, None, :], sin[:, None, :]
    a, b = x[..., xi], x[..., yi]
    out[..., xi] = a * c - b * s
    out[..., yi] = b * c + a * s
    return out


def reference(
    *,
    positions: np.ndarray,
    query: np.ndarray,
    cos_sin_cache: np.ndarray,
    rot_dim: int,
    head_size: int,
    key: np.ndarray | None = None,
    IS_NEOX: bool | None = None,
    is_neox: bool = True,
    **_: object,
) -> dict[str, np.ndarray]:
    """positions [T]; query [T, num_heads, head_size]; key [T, num_kv_heads, head_size] or None;
    cos_sin_cache [max_position, rot_dim] (cos then sin). Returns the rotated "query" (and "key").
    """
    neox = is_neox if IS_NEOX is None else IS_NEOX
    pos = np.asarray(positions, dtype=np.int64).reshape(-1)
    cache = np.asarray(cos_sin_cache, dtype=np.float64)[pos]
    half = rot_dim // 2
    cos, sin = cache[:, :half], cache[:, half:rot_dim]
    q = np.asarray(query, dtype=np.float64)
    result = {
        "query": _rotate(q.reshape(len(pos), -1, head_size), cos, sin, rot_dim, neox).reshape(
            q.shape
        )
    }
    if key is not None:
        k = np.asarray(key, dtype=np.float64)
        result["key"] = _rotate(
            k.reshape(len(pos), -1, head_size), cos, sin, rot_dim, neox
        ).reshape(k.shape)
    return result


def rope(inputs: Mapping[str, Any], shape: Mapping[str, int]) -> dict[str, np.ndarray]:
    """ktx.toml entry point (``reference:rope``): inputs by parameter name, shape vars."""
    return reference(**{**shape, **inputs})
