"""The README's first command: ``ktx optimize`` on a suite kernel runs anywhere. Without a GPU it
replays the committed recording of a real run, says so on every line (device and date), and
shows the whole loop: plan, template, search, dispatch table, report."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ktx import offline

ROOT = Path(__file__).resolve().parents[2]


def readme_first_command() -> str:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```sh\n(.*?)```", text, re.S)
    assert block is not None
    return block.group(1).splitlines()[0]


def test_the_readme_starts_with_the_main_job() -> None:
    first = readme_first_command()
    assert "pip install" in first
    assert re.search(r"\.venv/bin/ktx optimize kernels/\w+", first), first


@pytest.mark.slow
def test_main_job_replays_on_a_cpu(tmp_path: Path) -> None:
    # The ktx part of the README's first command, with CuPy made blind (no GPU, as on a laptop).
    ktx_part = readme_first_command().split("&&")[-1].strip()
    argv = shlex.split(ktx_part)[1:]
    assert argv[0] == "optimize"
    code = (
        "import sys, ktx.offline as o; o.gpu_available = lambda: False; "
        "from ktx.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", code, *argv, "--out", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    wall = time.monotonic() - start
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    tag = "[REPLAY of NVIDIA H200, 2026-11-21 14:37:53 UTC; no GPU here]"
    assert lines and all(line.startswith(tag) for line in lines), [x for x in lines if not x.startswith(tag)]
    out = proc.stdout
    assert "| 1 | rules | `split` | improved |" in out  # plan and search
    assert "plan (rules): `split`" in out and "split: 1 latency-bound shape(s)" in out
    assert "template: " in out and "#define KTX_SPLIT" in out
    assert "dispatch table: " in out and "d=4096: {'SPLIT': 4}" in out
    assert "report: " in out and (tmp_path / "run" / "report" / "report.html").is_file()
    # the recorded run, not a new one: its 2 rounds and its stop reason, nothing unrecorded
    assert "(replay of the recorded run: 2 round(s), stop: budget)" in lines[0]
    assert "stopped: budget (as recorded)" in out
    assert "not in the recording" not in (tmp_path / "run" / "cache.jsonl").read_text()
    assert wall < 60, f"{wall:.0f} s"


def test_no_gpu_and_no_recording_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(offline, "gpu_available", lambda: False)
    with pytest.raises(offline.NoGpuError, match="no CUDA GPU here"):
        offline.resolve("auto", tmp_path)
    assert offline.resolve("cupy", tmp_path) == ("cupy", None)
