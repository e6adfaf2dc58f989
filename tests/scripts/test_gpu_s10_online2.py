"""scripts/gpu_s10_online2.py on the CPU: every ONLINE=2 / ONLINE=1 / hand candidate it pairs builds."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script() -> Any:
    spec = importlib.util.spec_from_file_location("gpu_s10_online2", ROOT / "scripts" / "gpu_s10_online2.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gpu_s10_online2"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
def test_dry_run_builds_every_pair_and_hand_candidate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    llmc = ROOT / "shared" / "llmc"
    if not (llmc / "dev" / "cuda" / "common.h").is_file():
        pytest.skip("needs shared/llmc (cp -a /work/shared/llmc shared/llmc)")
    mod = _script()
    assert mod.main(["--out", str(tmp_path), "--llmc", str(llmc), "--dry-run"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == sum(2 * len(c.shapes) for c in mod.cells()) == 24
    sides = {r["side"] for r in rows}
    assert any("ONLINE=2" in s for s in sides) and any("ONLINE=1" in s for s in sides)
    names = {r["name"] for r in rows}
    ln = {f"layernorm_forward_kernel{v}" for v in (1, 3, 4, 5)}
    assert ln | {"fused_residual_forward2", "fused_residual_forward_kernel4"} == names
    # the ONLINE=2 template really packs its fused loop (the point of the cells)
    from ktx.pipeline import template_for_spec
    from ktx.specload import load_spec

    stage = mod.L.Stage(llmc, tmp_path / "stage2")
    for kernel in (mod.L.FR, mod.L.LN):
        t = template_for_spec(load_spec(stage.folder(kernel)), mod.PIPELINE)
        fused = [o.message for o in t.outcomes if o.status == "skipped" and "ktx_v_s" in o.message]
        assert not fused, fused
