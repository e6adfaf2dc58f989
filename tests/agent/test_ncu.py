"""Nsight Compute: the command line, CSV parsing, and the loop with a fake ``ncu`` on the PATH."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from ktx.agent import ncu
from ktx.agent.loop import OptimizeRequest, load_records, optimize

from .model_backend import ModelBackend

ROOT = Path(__file__).resolve().parents[2]
KERNEL = ROOT / "kernels" / "silu_and_mul"

_HEAD = (
    "ID", "Process ID", "Kernel Name",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio",
)  # fmt: skip
_UNITS = ("", "", "", "%", "%", "%", "ratio", "ratio", "ratio", "ratio")
_ROW = (
    "0", "4243", "void silu_and_mul_kernel<__nv_bfloat16>(T1 *, const T1 *, int)",
    "87.51", "12.3", "71.02", "1,204.5", "0", "3.1", "0.7",
)  # fmt: skip
CSV = (
    "\n".join(
        [
            "==PROF== Connected to process 4242",
            '==PROF== Profiling "silu_and_mul_kernel": 0%....50%....100% - 9 passes',
            *(",".join(f'"{c}"' for c in row) for row in (_HEAD, _UNITS, _ROW)),
        ]
    )
    + "\n"
)


def fake_ncu(folder: Path) -> Path:
    exe = folder / "ncu"
    data = folder / "ncu.csv"
    data.write_text(CSV)
    exe.write_text(f'#!/bin/sh\necho "$@" >> {folder / "args.txt"}\ncat {data}\n')
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe


def test_parse_csv() -> None:
    raw = ncu.parse_csv(CSV)
    m = ncu.metrics_from(raw)
    assert m.dram_throughput_pct == 87.51 and m.sm_throughput_pct == 12.3
    assert m.achieved_occupancy_pct == 71.02
    assert m.stalls == (("long_scoreboard", 1204.5), ("wait", 3.1), ("math_pipe_throttle", 0.7))
    assert "DRAM throughput 88%" in m.text()
    assert ncu.parse_csv("==ERROR== no permission\n") == {}


def test_dram_throughput_under_the_speed_of_light_sections_name() -> None:
    """ncu 2025.3 on an H200 named it gpu__dram_throughput; the metric came back empty before."""
    renamed = CSV.replace('"dram__throughput.', '"gpu__dram_throughput.')
    assert ncu.metrics_from(ncu.parse_csv(renamed)).dram_throughput_pct == 87.51


def test_command_line() -> None:
    cmd = ncu.command("ncu", Path("kernels/k"), "tokens=1,d=64", "k_kernel")
    assert cmd[:3] == ["ncu", "--clock-control", "none"]
    assert "--target-processes" in cmd and "regex:k_kernel" in cmd
    assert cmd[cmd.index("--launch-count") + 1] == "1"
    assert cmd[-7:] == ["-m", "ktx", "run", "kernels/k", "--shape", "tokens=1,d=64", "--no-odd"]


def test_profile_errors(tmp_path: Path) -> None:
    assert ncu.profile(KERNEL, "s", "k", ncu=str(tmp_path / "missing")).error.startswith("ncu did not finish")
    bad = tmp_path / "ncu"
    bad.write_text("#!/bin/sh\necho '==ERROR== ERR_NVGPUCTRPERM' >&2\nexit 1\n")
    bad.chmod(0o755)
    result = ncu.profile(KERNEL, "s", "k", ncu=str(bad))
    assert result.metrics is None and "ERR_NVGPUCTRPERM" in result.error and "exit 1" in result.error


def test_loop_uses_ncu_metrics(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_ncu(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    out = tmp_path / "run"
    req = OptimizeRequest(
        kernel_dir=KERNEL, rounds=1, trials_per_round=4, out=out,
        shapes=("tokens=1,d=4096", "tokens=64,d=4096"), ncu="on",
    )  # fmt: skip
    optimize(req, backend=ModelBackend())
    baseline = json.loads((out / "baseline.json").read_text())
    assert set(baseline["ncu"]) == {"tokens=1,d=4096", "tokens=64,d=4096"}
    shapes = load_records(out)[0]["analysis"]["shapes"]
    assert shapes[0]["ncu"]["dram_throughput_pct"] == 87.51
    assert shapes[0]["bound"] == "memory" and "Nsight Compute" in shapes[0]["why"]
    args = (tmp_path / "args.txt").read_text().splitlines()
    assert len(args) == 2 and "--clock-control none" in args[0]


def test_ncu_on_without_ncu_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    from ktx.cli import main

    code = main(["optimize", str(KERNEL), "--ncu", "on", "--backend", f"replay:{tmp_path / 'x.json'}",
                 "--out", str(tmp_path / "run")])  # fmt: skip
    assert code == 2


def test_ncu_auto_takes_a_tenth_of_the_budget_at_most() -> None:
    """Session 8's probe: two profiles took 25-28 s of a 40 s budget before round 1."""
    shapes = ["a=1", "b=2"]
    assert ncu.budgeted(shapes, None, "auto") == (shapes, "")
    assert ncu.budgeted(shapes, 40.0, "on") == (shapes, "")
    kept, why = ncu.budgeted(shapes, 40.0, "auto")
    assert kept == [] and why.startswith("skipped:") and "10% of the --budget of 40 s" in why
    kept, why = ncu.budgeted(shapes, 200.0, "auto")
    assert kept == ["a=1"] and "profiled a=1 only" in why and "300 s would profile one more" in why
    assert ncu.budgeted(shapes, 300.0, "auto") == (shapes, "")


@pytest.mark.slow
def test_a_small_budget_runs_no_profile_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_ncu(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    out = tmp_path / "run"
    req = OptimizeRequest(
        kernel_dir=KERNEL, rounds=1, trials_per_round=4, out=out, budget_s=40.0,
        shapes=("tokens=1,d=4096", "tokens=64,d=4096"), ncu="auto",
    )  # fmt: skip
    result = optimize(req, backend=ModelBackend())
    assert not (tmp_path / "args.txt").exists(), "ncu ran"
    assert json.loads((out / "baseline.json").read_text())["ncu"] == {}
    assert any(n.startswith("ncu: skipped:") for n in result.notes)
    assert result.phases is not None and result.phases.ncu_s == 0.0
