"""The worker's memo of seeded inputs and reference outputs: hits, read-only entries, byte bound."""

from __future__ import annotations

import numpy as np
import pytest

from ktx.measure.gpu import ArrayMemo


def test_second_get_is_a_hit_and_entries_are_read_only() -> None:
    memo = ArrayMemo(max_bytes=1 << 20)
    calls = []

    def make() -> dict[str, np.ndarray]:
        calls.append(1)
        return {"x": np.arange(8, dtype=np.float32)}

    first = memo.get(("k", 1), make)
    second = memo.get(("k", 1), make)
    assert second is first and len(calls) == 1 and (memo.hits, memo.misses) == (1, 1)
    with pytest.raises(ValueError):
        first["x"][0] = 5.0


def test_least_recently_used_entry_goes_first_past_the_byte_bound() -> None:
    memo = ArrayMemo(max_bytes=2 * 800)
    for key in ("a", "b"):
        memo.get((key,), lambda: {"v": np.zeros(100, dtype=np.float64)})  # 800 bytes each
    memo.get(("a",), lambda: {"v": np.ones(100)})  # a is now the most recent
    memo.get(("c",), lambda: {"v": np.zeros(100)})  # evicts b
    assert memo.bytes <= memo.max_bytes
    assert memo.get(("a",), lambda: {"v": np.full(100, 7.0)})["v"][0] == 0.0, "a stayed"
    made = []
    memo.get(("b",), lambda: made.append(1) or {"v": np.zeros(100)})
    assert made == [1], "b was evicted and had to be made again"


def test_an_entry_larger_than_the_bound_is_returned_but_not_kept() -> None:
    memo = ArrayMemo(max_bytes=100)
    big = memo.get(("big",), lambda: {"v": np.zeros(1000)})
    assert big["v"].size == 1000 and memo.bytes == 0
