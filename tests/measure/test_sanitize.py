"""``ktx run --sanitize`` on the CPU: where compute-sanitizer is looked for (exit 2 naming the
places when it is missing), how its output becomes one block, and the command's plumbing with a
stand-in compute-sanitizer script that prints what the real one prints."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from ktx.cli import main
from ktx.measure import sanitize as sanitize_mod
from ktx.measure.sanitize import MARK, find_sanitizer, parse, render

ROOT = Path(__file__).resolve().parents[2]

MEMCHECK_OOB = f"""========= COMPUTE-SANITIZER
{MARK} launching silu_and_mul_kernel<__nv_bfloat16> grid=(4, 1, 1) block=(1024, 1, 1) shared=0
========= Invalid __global__ write of size 16 bytes
=========     at silu_and_mul_kernel<__nv_bfloat16>(T1 *, const T1 *, int)+0x2f0 in kernel.cu:11
=========     by thread (1023,0,0) in block (3,0,0)
=========     Address 0x7f1c2a008000 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f1c2a000000 of size 32768 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: cuLaunchKernel [0x2d1b5a] in libcuda.so.1
=========
{MARK} failed: CUDADriverError: CUDA_ERROR_LAUNCH_FAILED: unspecified launch failure
========= ERROR SUMMARY: 1 error
"""
MEMCHECK_CLEAN = f"""========= COMPUTE-SANITIZER
{MARK} launching k grid=(4, 1, 1) block=(256, 1, 1) shared=0
{MARK} done k
========= ERROR SUMMARY: 0 errors
"""
RACECHECK_CLEAN = f"""========= COMPUTE-SANITIZER
{MARK} launching k grid=(4, 1, 1) block=(256, 1, 1) shared=0
{MARK} done k
========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)
"""
RACECHECK_HAZARD = f"""========= COMPUTE-SANITIZER
{MARK} launching k grid=(4, 1, 1) block=(256, 1, 1) shared=1024
========= Error: Race reported between Write access at k+0x120 in kernel.cu:20
=========     and Read access at k+0x1a0 in kernel.cu:22 [4 hazards]
{MARK} done k
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""


def test_memcheck_output_becomes_a_count_and_findings_without_backtraces() -> None:
    r = parse("memcheck", MEMCHECK_OOB, 3)
    assert r.errors == 1 and r.launched and not r.clean
    assert r.findings[0] == "Invalid __global__ write of size 16 bytes"
    assert any("1 bytes after the nearest allocation" in f for f in r.findings)
    assert not any("Host Frame" in f or "backtrace" in f for f in r.findings)


def test_racecheck_summaries() -> None:
    clean = parse("racecheck", RACECHECK_CLEAN, 0)
    assert clean.errors == 0 and clean.clean and clean.findings == ()
    hazard = parse("racecheck", RACECHECK_HAZARD, 0)
    assert hazard.errors == 1 and not hazard.clean and "Race reported" in hazard.findings[0]


def test_one_block_says_each_tool_and_the_verdict() -> None:
    block = render(
        [parse("memcheck", MEMCHECK_OOB, 3), parse("racecheck", RACECHECK_CLEAN, 0)], "/cs", "k @ n=1"
    )
    lines = block.splitlines()
    assert lines[0] == "compute-sanitizer (/cs) on k @ n=1:"
    assert lines[1].split() == ["memcheck", "1", "error"]
    assert "Invalid __global__ write of size 16 bytes" in block
    assert any(line.split()[:2] == ["racecheck", "clean,"] for line in lines)
    assert lines[-1] == "  verdict: FINDINGS: fix the kernel (or the spec) first"
    # a child that never launched shows its own output
    broken = parse("memcheck", f"========= COMPUTE-SANITIZER\n{MARK} failed: KtxError: no\n", 3)
    assert broken.errors is None and "failed: KtxError" in render([broken], "/cs", "k")


@pytest.fixture
def no_toolkit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No compute-sanitizer anywhere: an empty PATH folder, no CUDA_HOME, no toolkit folders."""
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(sanitize_mod, "find_nvcc", lambda: None)
    monkeypatch.setattr(sanitize_mod, "CUDA_GLOB", str(tmp_path / "cuda*" / "bin"))
    return empty


def test_missing_sanitizer_exits_2_saying_where_it_looked(
    no_toolkit: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    toolkit = tmp_path / "cuda-13.0" / "bin"
    toolkit.mkdir(parents=True)  # a toolkit folder without the tool
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda-12.8"))
    assert find_sanitizer() == (None, ["PATH", str(tmp_path / "cuda-12.8" / "bin"), str(toolkit)])
    code = main(["run", str(ROOT / "kernels" / "silu_and_mul"), "--sanitize"])
    err = capsys.readouterr().err
    assert code == 2
    assert "compute-sanitizer not found; looked in: PATH, " in err and str(toolkit) in err
    assert "Traceback" not in err


def fake_sanitizer(folder: Path, memcheck: str, racecheck: str) -> Path:
    """A compute-sanitizer stand-in that prints canned output for --tool T (runs nothing)."""
    (folder / "memcheck.txt").write_text(memcheck)
    (folder / "racecheck.txt").write_text(racecheck)
    script = folder / "compute-sanitizer"
    script.write_text(
        f"#!{sys.executable}\nimport sys\nsys.stdout.write(open(f'{folder}/{{sys.argv[2]}}.txt').read())\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


@pytest.mark.parametrize(
    ("memcheck", "code", "verdict"), [(MEMCHECK_CLEAN, 0, "clean"), (MEMCHECK_OOB, 1, "FINDINGS")]
)
def test_run_sanitize_prints_one_block(
    no_toolkit: Path, memcheck: str, code: int, verdict: str, capsys: pytest.CaptureFixture[str]
) -> None:
    found = fake_sanitizer(no_toolkit, memcheck, RACECHECK_CLEAN)
    assert find_sanitizer()[0] == str(found) and os.access(found, os.X_OK)
    status = main(["run", str(ROOT / "kernels" / "silu_and_mul"), "--sanitize", "--shape", "tokens=4,d=4096"])
    out = capsys.readouterr().out
    assert status == code, out
    assert out.startswith(f"compute-sanitizer ({found}) on silu_and_mul @ tokens=4,d=4096, original:")
    assert f"verdict: {verdict}" in out


def test_a_hung_child_is_reported_not_raised(no_toolkit: Path) -> None:
    from ktx.measure.sanitize import sanitize
    from ktx.measure.types import original_candidate
    from ktx.specload import load_spec

    script = no_toolkit / "compute-sanitizer"
    body = "import time\nprint('========= COMPUTE-SANITIZER', flush=True)\ntime.sleep(30)\n"
    script.write_text(f"#!{sys.executable}\n{body}")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    spec = load_spec(ROOT / "kernels" / "silu_and_mul")
    code, block = sanitize(spec, original_candidate(spec), spec.find_point("tokens=4,d=4096"), timeout_s=1.0)
    assert code == 1
    assert block.count("timed out after 1 s") == 2 and "no summary (exit 124)" in block


def test_the_tools_leave_api_errors_out_and_run_the_child_on_the_job(no_toolkit: Path) -> None:
    """CUDA's runtime and Python GPU stacks make driver calls that fail by design; counted as
    errors they would make a clean kernel's block say FINDINGS. Each tool gets
    ``--report-api-errors no`` (memcheck also a padding after each allocation) and the child
    ``python -m ktx.measure.sanitize JOB``."""
    from ktx.measure.sanitize import sanitize
    from ktx.measure.types import original_candidate
    from ktx.specload import load_spec

    (no_toolkit / "memcheck.txt").write_text(MEMCHECK_CLEAN)
    (no_toolkit / "racecheck.txt").write_text(RACECHECK_CLEAN)
    script = no_toolkit / "compute-sanitizer"
    script.write_text(
        f"#!{sys.executable}\nimport json, sys\n"
        f"open('{no_toolkit}/argv-' + sys.argv[2], 'w').write(json.dumps(sys.argv[1:]))\n"
        f"sys.stdout.write(open(f'{no_toolkit}/{{sys.argv[2]}}.txt').read())\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    spec = load_spec(ROOT / "kernels" / "silu_and_mul")
    code, block = sanitize(spec, original_candidate(spec), spec.find_point("tokens=4,d=4096"))
    assert code == 0, block
    for tool in ("memcheck", "racecheck"):
        argv = json.loads((no_toolkit / f"argv-{tool}").read_text())
        child = argv.index(sys.executable)
        assert argv[:2] == ["--tool", tool]
        options = argv[2:child]
        assert options[options.index("--report-api-errors") + 1] == "no", argv
        assert options[options.index("--target-processes") + 1] == "application-only", argv
        # memcheck pads each allocation: a store just past an exact-size buffer is seen even
        # where the next allocation starts right there
        assert ("--padding" in options) == (tool == "memcheck"), argv
        assert argv[child + 1 : child + 3] == ["-m", "ktx.measure.sanitize"] and argv[-1].endswith("job.json")
