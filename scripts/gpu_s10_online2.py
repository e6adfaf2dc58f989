"""Session 10, s10-online2: online's Σx, Σx² pair (ONLINE=2) on the GPU, verified, then timed in pairs.

The cells reuse :mod:`gpu_s10_ladder`'s machinery (one harness per kernel; every candidate
verified against the naive kernel's Python reference, then A and B timed alternately, 7 pairs,
the ratio A / B with its 95% interval in the single-launch and graph metrics); only the cells
differ. At the ladder's shapes (B=1/8/32, T=1024, C=768):

* fused_residual: ``row-owner,online,vectorize{tie,peel}`` at ONLINE=2 (the fused first loop
  packed) against the same config at ONLINE=1 (Welford: that loop scalar), then against hand v4
  at session 9's best block sizes;
* layernorm: the same pipeline at ONLINE=2 against ONLINE=1, then against the best hand version
  of session 9's ladder at each shape (v5/v3/v4).

The thread counts and pack widths are the ladder's (:data:`gpu_s10_ladder.FR_ONLINE`, and
layernorm's row-owner,vectorize VEC 4 config): what the search reaches first, not a sweep.

    python scripts/gpu_s10_online2.py --llmc shared/llmc --out DIR [--deadline-s 150] [--dry-run]
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent


def _ladder() -> Any:
    spec = importlib.util.spec_from_file_location("gpu_s10_ladder", ROOT / "gpu_s10_ladder.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gpu_s10_ladder"] = mod
    spec.loader.exec_module(mod)
    return mod


L = _ladder()
PIPELINE = "row-owner,online,vectorize{tie=true,peel=true}"

#: per shape: THREADS_PER_ROW and VEC_LOOPS of the ladder's configs
FR_AT = {"b1": (128, 4), "b8": (32, 8), "b32": (32, 8)}
LN_AT = {"b1": (256, 4), "b8": (32, 4), "b32": (32, 4)}


def side(label: str, at: Mapping[str, tuple[int, int]], online: int) -> Any:
    configs = {k: {"THREADS_PER_ROW": t, "ONLINE": online, "VEC_LOOPS": v} for k, (t, v) in at.items()}
    return L.Side(label, PIPELINE, L.per_shape(**configs))


FR_PAIR = side("ktx row-owner,online,vectorize ONLINE=2 (Σx, Σx²)", FR_AT, 2)
FR_WELFORD = side("ktx row-owner,online,vectorize ONLINE=1 (Welford)", FR_AT, 1)
LN_PAIR = side("ktx row-owner,online,vectorize ONLINE=2 (Σx, Σx²)", LN_AT, 2)
LN_WELFORD = side("ktx row-owner,online,vectorize ONLINE=1 (Welford)", LN_AT, 1)


def cells() -> list[Any]:
    """In order of value (the deadline skips the tail); a kernel's cells are consecutive."""
    best = L.LN_HAND_BEST.items()
    ln_hand = [L.Cell(L.LN, (s,), LN_PAIR, L.Side("hand", hand=v, bs={s: bs})) for s, (v, bs) in best]
    return [
        L.Cell(L.FR, L.LADDER, FR_PAIR, FR_WELFORD),
        L.Cell(L.FR, L.LADDER, FR_PAIR, L.FR_HAND),
        L.Cell(L.LN, L.LADDER, LN_PAIR, LN_WELFORD),
        *ln_hand,
    ]


def main(argv: Sequence[str] | None = None) -> int:
    L.cells = cells  # the ladder script's main runs whatever cells() its module names
    return int(L.main(argv))


if __name__ == "__main__":
    raise SystemExit(main())
