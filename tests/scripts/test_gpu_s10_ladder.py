"""scripts/gpu_s10_ladder.py on the stand-in GPU: every candidate builds, compiles and is paired."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
FAKE = str(ROOT / "tests" / "measure" / "fake_gpu.py") + ":handle"


def _script() -> Any:
    spec = importlib.util.spec_from_file_location("gpu_s10_ladder", ROOT / "scripts" / "gpu_s10_ladder.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gpu_s10_ladder"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_merge_cells_compile_verify_and_pair(tmp_path: Path) -> None:
    """The merge cells: the hand variant (PACKS 1 and 2) and the suite kernel are verified, the
    probe is not (it is no merge), and each pair is timed 7 times; the stand-in GPU times every
    kernel alike, so every ratio is 1. The compiles are real (nvcc for sm_90)."""
    mod = _script()
    rc = mod.main(["--out", str(tmp_path), "--only", "merge", "--handler", FAKE, "--deadline-s", "300"])
    data = json.loads((tmp_path / "paired.json").read_text())
    rows = data["rows"]
    assert rc == 0 and len(rows) == 3 * len(mod.MERGE_SHAPES)
    for row in rows:
        assert row["status"] == "measured", row
        assert row["graph"]["a_over_b"]["estimate"] == pytest.approx(1.0)
        assert row["graph"]["a_over_b"]["n"] == mod.PAIRS
        if row["a"].startswith("traffic probe"):
            assert row["verify"]["a"] == "not verified (probe)" and row["verify"]["b"] == "ok"
        else:
            assert row["verify"] == {"a": "ok", "b": "ok"}
    table = (tmp_path / "paired.md").read_text()
    assert "hand PACKS=2" in table and "hand PACKS=1" in table and "traffic probe" in table
    assert table.count("| kernels/merge_attn_states |") == len(rows)


@pytest.mark.slow
def test_dry_run_builds_every_ladder_and_merge_candidate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every config of the script exists in today's passes, and every hand launch resolves."""
    llmc = ROOT / "shared" / "llmc"
    if not (llmc / "dev" / "cuda" / "common.h").is_file():
        pytest.skip("needs shared/llmc (cp -a /work/shared/llmc shared/llmc)")
    mod = _script()
    assert mod.main(["--out", str(tmp_path), "--llmc", str(llmc), "--dry-run"]) == 0
    rows = json.loads(capsys.readouterr().out)
    expected = sum(2 * len(c.shapes) for c in mod.cells())
    assert len(rows) == expected
    names = {r["name"] for r in rows}
    assert {"layernorm_forward_kernel1", "layernorm_forward_kernel3", "layernorm_forward_kernel4",
            "layernorm_forward_kernel5", "fused_residual_forward2", "fused_residual_forward_kernel4",
            "encoder_forward_kernel1", "encoder_forward_kernel3", "merge_attn_states_hand<2>",
            "merge_traffic_probe"} <= names  # fmt: skip
