"""benchmarks/merge_hand: the headroom table's arithmetic and the hand variant's build."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "benchmarks" / "merge_hand"


def _headroom() -> Any:
    spec = importlib.util.spec_from_file_location("merge_headroom", HERE / "headroom.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["merge_headroom"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_bytes_are_two_value_reads_one_write_and_three_lse_vectors() -> None:
    mod = _headroom()
    assert mod.shape_bytes(256, 32, 128) == 3 * 256 * 32 * 128 * 2 + 3 * 32 * 256 * 4 == 6_389_760


def test_the_table_from_session_2_summary() -> None:
    """All 15 shapes; the bandwidth recovered from each shape's speed-of-light fraction is one
    device's copy rate (the same within 1%); the bound is above 1 and falls as the bytes grow."""
    import json

    mod = _headroom()
    rows = mod.rows(json.loads(mod.SUMMARY.read_text())["summary"])
    assert len(rows) == 15
    bws = [r["bandwidth_gbs"] for r in rows]
    assert max(bws) / min(bws) < 1.01 and 4000 < bws[0] < 4400
    by_bytes = sorted(rows, key=lambda r: r["bytes"])
    assert by_bytes[0]["bound"] > 1.9 and by_bytes[-1]["bound"] < 1.15
    assert all(r["bound"] > 1.0 for r in rows)
    text = mod.markdown(rows, "H200")
    assert text.count("| tokens=") == 15


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_hand_variant_and_probe_build_for_sm90_without_spills(tmp_path: Path) -> None:
    out = subprocess.run(
        ["nvcc", "-cubin", "-arch=sm_90", "-std=c++17", "-use_fast_math", "-Xptxas", "-v",
         str(HERE / "kernel.cu"), "-o", str(tmp_path / "k.cubin")],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    log = out.stderr
    for name in ("merge_traffic_probe", "merge_attn_states_handILi1", "merge_attn_states_handILi2",
                 "merge_attn_states_handILi4"):  # fmt: skip
        assert name in log
    spills = [line for line in log.splitlines() if "spill" in line]
    assert len(spills) == 4 and all(" 0 bytes spill stores, 0 bytes spill loads" in s for s in spills)
