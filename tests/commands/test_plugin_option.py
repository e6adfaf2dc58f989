"""``--plugin`` on tune, optimize, run and bench: loaded, recorded in the run folder, reloaded on
resume and by ``--workers`` processes, and a broken plugin is one line with exit 2.

The search goes through ``ktx tune --backend replay:FILE`` over a recording of the plugin's own
pipeline (``warps`` from examples/custom_pass.py), built from the SYNTHETIC cost model."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from ktx import registry
from ktx.cli import main
from ktx.search import synthetic
from ktx.search.recording import write

ROOT = Path(__file__).resolve().parents[2]
SILU = ROOT / "kernels" / "silu_and_mul"
PLUGIN = ROOT / "examples" / "custom_pass.py"
SHAPES = ((1, 4096), (16, 4096))
WARPS = (0, 1, 2, 4, 8, 16)


def warps_recording(path: Path) -> Path:
    """Every WARPS config at every shape, timed by the synthetic model as BLOCK = 32 * WARPS."""
    rows = []
    for tokens, d in SHAPES:
        original = synthetic.model({}, tokens, d, "silu_and_mul")
        rows += [original.to_dict(), replace(original, config={"WARPS": 0}).to_dict()]
        for w in WARPS[1:]:
            full = {"BLOCK": 32 * w, "VEC": 8, "UNROLL": 1, "SPLIT": 1, "COARSEN": 1}
            m = synthetic.model(full, tokens, d, "silu_and_mul")
            rows.append(replace(m, config={"WARPS": w}).to_dict())
    data = {
        "format": "ktx.recording/1",
        "kernel": "silu_and_mul",
        "synthetic": True,
        "method": synthetic.MODEL,
        "device": synthetic.DEVICE.name,
        "space": {"knobs": [{"name": "WARPS", "values": list(WARPS), "default": 0}], "constraints": []},
        "measurements": rows,
    }
    write(data, path)
    return path


@pytest.fixture(autouse=True)
def _no_inherited_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    # setenv, not delenv: teardown then restores the variable the plugins loaded here set.
    monkeypatch.setenv(registry.PLUGINS_ENV, "")


def ktx(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "ktx", *argv]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=cwd)


def tune_argv(rec: Path, out: Path, *extra: str) -> list[str]:
    shapes = ";".join(synthetic.shape_name(t, d) for t, d in SHAPES)
    return ["tune", "--passes", "warps", "--backend", f"replay:{rec}", "--shapes", shapes, "--trials", "6",
            "--quiet", "--holdout", "none", "--out", str(out), "--seed", "1", *extra, str(SILU)]  # fmt: skip


@pytest.mark.slow
def test_tune_with_a_plugin_records_it_and_a_resume_reloads_it(tmp_path: Path) -> None:
    rec = warps_recording(tmp_path / "rec" / "warps.json")
    out = tmp_path / "run"
    first = ktx(*tune_argv(rec, out, "--plugin", str(PLUGIN)))
    assert first.returncode == 0, first.stderr
    assert "| tokens=1,d=4096 | graph |" in first.stdout and "crash" not in first.stdout
    recorded = json.loads((out / "plugins.json").read_text())
    assert recorded == {"format": "ktx.plugins/1", "plugins": [str(PLUGIN)]}
    best = json.loads((out / "best.json").read_text())
    assert "WARPS" in json.dumps(best)
    # The same command without --plugin: the run folder's record loads the pass again.
    again = ktx(*tune_argv(rec, out))
    assert again.returncode == 0, again.stderr
    # Another folder with neither: the pass is unknown, one line, exit 2.
    bare = ktx(*tune_argv(rec, tmp_path / "bare"))
    assert bare.returncode == 2 and "unknown pass 'warps'" in bare.stderr
    assert len(bare.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_workers_load_the_plugin(tmp_path: Path) -> None:
    rec = warps_recording(tmp_path / "warps.json")
    out = tmp_path / "run"
    proc = ktx(*tune_argv(rec, out, "--plugin", str(PLUGIN), "--workers", "2"))
    assert proc.returncode == 0, proc.stderr
    assert "| tokens=16,d=4096 | graph |" in proc.stdout


def test_replay_of_a_recording_beside_a_plugin_record_loads_it(tmp_path: Path) -> None:
    rec = warps_recording(tmp_path / "rec" / "warps.json")
    registry.record_plugins(rec.parent, [str(PLUGIN)])
    proc = ktx(*tune_argv(rec, tmp_path / "run"))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "run" / "plugins.json").is_file()


@pytest.mark.parametrize("command", ["tune", "optimize", "run", "bench", "apply"])
def test_a_plugin_that_fails_to_import_is_one_line_and_exit_2(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad_plugin.py"
    bad.write_text("import os\n\nraise RuntimeError('boom')\n")
    target = str(SILU / "kernel.cu") if command == "apply" else str(SILU)
    extra = ["--passes", "split"] if command == "apply" else ["--out", str(tmp_path / "o")]
    if command in ("run", "bench"):
        extra = []
    code = main([command, "--plugin", str(bad), *extra, target])
    err = capsys.readouterr().err
    assert code == 2
    want = f"ktx: error: {bad}: cannot import plugin: RuntimeError: boom (line 3) (fix the plugin file)"
    assert err.strip() == want


def test_a_missing_module_plugin(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", str(SILU), "--plugin", "no_such_ktx_plugin_module"])
    err = capsys.readouterr().err
    assert code == 2 and "cannot import plugin 'no_such_ktx_plugin_module': ModuleNotFoundError" in err
