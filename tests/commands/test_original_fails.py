"""When the original kernel itself fails, the commands say so on one line and exit non-zero;
a tolerance key capped by another's default is warned about (issue 14)."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from ktx.cli import main
from ktx.commands._original import failure_line, tolerance_warnings
from ktx.measure.types import Status
from ktx.search import synthetic
from ktx.search.recording import write
from ktx.specload import load_spec

ROOT = Path(__file__).resolve().parents[2]
SILU = ROOT / "kernels" / "silu_and_mul"
SHAPES = ((1, 4096), (16, 4096))
WRONG = (
    "out: 7 of 4096 elements differ (beyond atol=0.01 + rtol=0.016*|want|); first at [0, 3]: "
    "got 1.5, want 1.25"
)


def recording_with_a_wrong_original(path: Path) -> Path:
    data = synthetic.recording(SHAPES, kernel="silu_and_mul")
    for row in data["measurements"]:
        if not row["config"]:
            row.update(status="wrong_result", message=WRONG, single=None, graph=None)
    write(data, path)
    return path


def test_tune_says_the_original_is_wrong_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rec = recording_with_a_wrong_original(tmp_path / "rec.json")
    shapes = ";".join(synthetic.shape_name(t, d) for t, d in SHAPES)
    code = main(["tune", str(SILU), "--backend", f"replay:{rec}", "--shapes", shapes, "--trials", "3",
                 "--quiet", "--holdout", "none", "--out", str(tmp_path / "run")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1
    lines = [line for line in err.splitlines() if "the original kernel fails" in line]
    assert len(lines) == 2
    assert lines[0] == (
        f"ktx: error: {SILU / 'ktx.toml'}: the original kernel fails at tokens=1,d=4096: wrong_result: "
        f"{WRONG}; tolerance in force: out bf16 rtol=0.016 atol=0.01 max_abs=1; "
        "look at [tolerance] bf16 and [reference] python"
    )


def test_failure_line_points_at_the_key_for_each_status() -> None:
    spec = load_spec(SILU)
    base = synthetic.model({}, 1, 4096, "silu_and_mul")
    compile_error = replace(base, status=Status.COMPILE_ERROR, message="error: identifier x\nmore")
    assert failure_line(spec, compile_error).endswith(
        "compile_error: error: identifier x; tolerance in force: out bf16 rtol=0.016 atol=0.01 max_abs=1; "
        "look at [compile] flags, template_args and source"
    )
    nvrtc_log = (
        "NVRTC: NVRTC_ERROR_COMPILATION (6)\n"
        'kernel.cu(1): catastrophic error: cannot open source file "common.h"\n'
        "1 catastrophic error detected"
    )
    nvrtc = replace(base, status=Status.COMPILE_ERROR, message=nvrtc_log)
    assert (
        "compile_error: NVRTC: NVRTC_ERROR_COMPILATION (6): kernel.cu(1): catastrophic error: "
        'cannot open source file "common.h"; tolerance'
    ) in failure_line(spec, nvrtc)
    resources = replace(base, status=Status.RESOURCES, message="too much shared memory")
    assert failure_line(spec, resources).endswith("look at [launch] block and shared")


def test_atol_capped_by_an_integer_max_abs_is_warned(tmp_path: Path) -> None:
    folder = tmp_path / "k"
    shutil.copytree(SILU, folder)
    spec_path = folder / "ktx.toml"
    old, new = 'dtype = "bf16"\nshape = "[tokens, d]"', 'dtype = "int8"\nshape = "[tokens, d]"'
    text = spec_path.read_text().replace(old, new)
    spec_path.write_text(text + "\n[tolerance]\nint8 = { atol = 1 }\n")
    warnings = tolerance_warnings(load_spec(folder))
    assert warnings == [
        f"{spec_path}: warning: [tolerance] int8: atol = 1 is capped by max_abs = 0 (the int8 default "
        "when not given); set max_abs too"
    ]
    spec_path.write_text(text + "\n[tolerance]\nint8 = { atol = 1, max_abs = 1 }\n")
    assert tolerance_warnings(load_spec(folder)) == []


def test_optimize_says_the_original_is_wrong_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    data = json.loads((SILU / "recorded" / "optimize" / "quick_h200_2026-11-21.json").read_text())
    # the measurements alone: a doctored original cannot follow the recorded run's rounds, so the
    # run section (which a faithful replay follows, diverging otherwise) goes
    data.pop("run", None)
    for row in data["measurements"]:
        if not row["config"]:
            row.update(status="wrong_result", message=WRONG, single=None, graph=None)
    rec = tmp_path / "rec.json"
    rec.write_text(json.dumps(data))
    code = main(["optimize", str(SILU), "--backend", f"replay:{rec}", "--shapes", "quick", "--rounds", "2",
                 "--trials-per-round", "4", "--ncu", "off", "--out", str(tmp_path / "run")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1
    lines = [line for line in err.splitlines() if "the original kernel fails" in line]
    assert [line.split(" fails at ")[1].split(":")[0] for line in lines] == [
        "tokens=1,d=4096", "tokens=256,d=11008", "tokens=4096,d=14336",
    ]  # fmt: skip
    assert all(line.endswith("look at [tolerance] bf16 and [reference] python") for line in lines)
