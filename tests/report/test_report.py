"""``ktx report``: Markdown, self-contained HTML (checked in headless Chromium), per-pass diffs, patch."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("matplotlib", reason="ktx report needs matplotlib (ktx[report])")

from agent.model_backend import ModelBackend

from ktx.agent.loop import OptimizeRequest, optimize
from ktx.agent.plan import Plan
from ktx.agent.planner import PlanContext, PlanOutcome
from ktx.cli import main
from ktx.commands.optimize import config_text, render
from ktx.report import load_run, make_report
from ktx.report.diffs import pass_diffs, patch, tuned_source

ROOT = Path(__file__).resolve().parents[2]
KERNEL = ROOT / "kernels" / "silu_and_mul"
SHAPES = ("tokens=1,d=4096", "tokens=16,d=4096", "tokens=4096,d=4096")


def request(out: Path, **kw: object) -> OptimizeRequest:
    return OptimizeRequest(
        kernel_dir=KERNEL,
        rounds=3,
        trials_per_round=8,
        out=out,
        shapes=SHAPES,
        ncu="off",
        **kw,  # type: ignore[arg-type]
    )


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report") / "run"
    optimize(request(out), backend=ModelBackend())
    return out


@pytest.fixture(scope="module")
def report(run_dir: Path) -> Path:
    assert main(["report", str(run_dir)]) == 0
    return run_dir / "report"


def test_markdown_sections(report: Path) -> None:
    md = (report / "report.md").read_text()
    for heading in (
        "## Per shape",
        "## What each round tried, and why",
        "### Best time per round",
        "### Speedup per shape",
        "### Fraction of speed-of-light per shape",
        "### Knob importance",
        "### Failures by type",
        "## The diff each pass made (final pipeline)",
        "### Dispatch header",
    ):
        assert heading in md, heading
    assert (
        "**fast math**: the spec already builds with -use_fast_math; the fast-math pass was not used; "
        "no dispatched config switches it on." in md
    )
    assert "| 1 | rules | `split` |" in md
    assert "fewer blocks than SMs" in md
    assert "```diff" in md and "+#define KTX_SPLIT 1" in md
    for name in re.findall(r"\]\((plots/[a-z]+\.png)\)", md):
        assert (report / name).read_bytes().startswith(b"\x89PNG")
    assert "wrong_result" in md  # the model's planted race, counted by type


def test_html_is_self_contained(report: Path) -> None:
    page = (report / "report.html").read_text()
    assert not re.search(r"""(?:src|href)=["'](?:https?:|//|file:|plots/)""", page)
    images = re.findall(r'<img [^>]*src="data:image/png;base64,([^"]+)"', page)
    assert len(images) == 5
    for data in images:
        assert base64.b64decode(data).startswith(b"\x89PNG")
    assert "<script>" in page and "data-images" in page


def test_pass_diffs_replay_to_the_template(run_dir: Path) -> None:
    run = load_run(run_dir)
    assert run.trace is not None and run.template is not None
    diffs = pass_diffs(run.original, run.trace)
    assert [d.pass_name for d in diffs][-1] == "knob header"
    assert diffs[0].pass_name == "split"
    assert "+  for (int idx = blockIdx.y * blockDim.x + threadIdx.x" in diffs[0].diff


def test_patch_applies_to_the_original(run_dir: Path, report: Path, tmp_path: Path) -> None:
    if shutil.which("patch") is None:
        pytest.skip("no patch(1) on this machine")
    run = load_run(run_dir)
    text = (report / "ktx.patch").read_text()
    tree = tmp_path / "tree"
    target = tree / run.source_rel
    target.parent.mkdir(parents=True)
    target.write_text(run.original)
    done = subprocess.run(
        ["patch", "-p1", "-i", str(report / "ktx.patch")], cwd=tree, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    tuned, _ = tuned_source(run.original, run.variants, run.dispatch, "silu_and_mul_dispatch.h")
    assert target.read_text() == tuned
    header = target.parent / "silu_and_mul_dispatch.h"
    assert header.read_text() == run.dispatch_header
    assert "ktx_dispatch_silu_and_mul(" in text


def test_patch_of_no_variant_keeps_the_file() -> None:
    tuned, what = tuned_source("int y;\n", (), None, "k_dispatch.h")
    assert tuned is None and "original" in what
    text = patch("int y;", "k/kernel.cu", tuned, "#pragma once\n", "k_dispatch.h")
    assert "--- a/k/kernel.cu" not in text and "--- /dev/null\n+++ b/k/k_dispatch.h" in text


@pytest.fixture(scope="module")
def single_variant_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A table with one tuned variant and the original for the large shape (and untuned ones)."""
    out = tmp_path_factory.mktemp("single") / "run"
    shapes = ("tokens=1,d=4096", "tokens=4096,d=4096")
    optimize(replace(request(out), rounds=2, trials_per_round=6, shapes=shapes), backend=ModelBackend())
    return out


@pytest.mark.slow
def test_single_variant_patch_keeps_the_original(single_variant_run: Path, tmp_path: Path) -> None:
    """Regression: with one variant the patch replaced the whole file (the original launcher
    included) by it, while the dispatch table still answers -1 (the original) for other shapes."""
    run = load_run(single_variant_run)
    assert len(run.variants) == 1 and run.dispatch is not None
    assert any(r.variant is None for r in run.dispatch.rules)  # the table can pick the original
    files = make_report(single_variant_run, tmp_path / "report")
    assert files.patch is not None
    tuned, what = tuned_source(run.original, run.variants, run.dispatch, "silu_and_mul_dispatch.h")
    assert tuned is not None and "chooses through the dispatch table" in what
    assert tuned.startswith(run.original.rstrip("\n"))  # the original, unchanged, first
    assert "namespace ktx_variant_0 {" in tuned and "silu_and_mul_kernel_ktx0<__nv_bfloat16><<<" in tuned
    assert "case 0: return ktx_variant_0::launch_silu_and_mul_ktx0(" in tuned
    assert "default: return ::launch_silu_and_mul(" in tuned
    tree = tmp_path / "tree"
    target = tree / run.source_rel
    target.parent.mkdir(parents=True)
    target.write_text(run.original)
    if shutil.which("patch") is None:
        pytest.skip("no patch(1) on this machine")
    done = subprocess.run(["patch", "-p1", "-i", str(files.patch)], cwd=tree, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert target.read_text() == tuned
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("no nvcc on this machine")
    obj = subprocess.run(
        [nvcc, "-std=c++17", "-arch=sm_90", "-c", target.name, "-o", "kernel.o"],
        cwd=target.parent, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert obj.returncode == 0, obj.stderr[-3000:]
    # Both reachable from one build: a caller instantiates the dispatching launcher, and the
    # header sends the tuned shape to variant 0 and the others to the original (-1).
    probe = target.parent / "probe.cu"
    probe.write_text(
        '#include "kernel.cu"\n#include <cstdio>\n'
        "int main() {\n"
        "  auto* launch = &ktx_launch_silu_and_mul<\n"
        "      __nv_bfloat16*, const __nv_bfloat16*, int, int, cudaStream_t>;\n"
        '  std::printf("%d %d %d %d\\n", ktx_dispatch_silu_and_mul(1, 4096).variant,\n'
        "              ktx_dispatch_silu_and_mul(4096, 4096).variant,\n"
        "              ktx_dispatch_silu_and_mul(8, 512).variant, launch != nullptr);\n"
        "}\n"
    )
    exe = subprocess.run(
        [nvcc, "-std=c++17", "-arch=sm_90", "probe.cu", "-o", "probe"],
        cwd=target.parent, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert exe.returncode == 0, exe.stderr[-3000:]
    nm = subprocess.run(["nm", "-C", str(target.parent / "probe")], capture_output=True, text=True)
    symbols = nm.stdout
    assert "launch_silu_and_mul(__nv_bfloat16*" in symbols
    assert "ktx_variant_0::launch_silu_and_mul_ktx0(__nv_bfloat16*" in symbols
    assert "silu_and_mul_kernel<__nv_bfloat16>" in symbols
    assert "ktx_variant_0::silu_and_mul_kernel_ktx0<__nv_bfloat16>" in symbols
    ran = subprocess.run(["./probe"], cwd=target.parent, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0 and ran.stdout.split() == ["0", "-1", "-1", "1"], ran.stdout + ran.stderr


class StopPlanner:
    name = "rules"

    def plan(self, context: PlanContext) -> PlanOutcome:
        return PlanOutcome(Plan((), "nothing to try", stop=True))


def test_report_when_nothing_improved(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = optimize(request(out), backend=ModelBackend(), planner=StopPlanner())
    assert result.best_round == 0 and result.stop_reason == "planner"
    files = make_report(out)
    assert files.patch is None
    md = files.markdown.read_text()
    assert "none (the original kernel is kept)" in md and "No pass changed the kernel." in md
    assert (out / "final" / "README").exists()


def test_report_errors(tmp_path: Path) -> None:
    assert main(["report", str(tmp_path / "missing")]) == 2
    assert main(["report", str(tmp_path)]) == 2
    (tmp_path / "optimize.json").write_text(json.dumps({"format": "other"}))
    assert main(["report", str(tmp_path)]) == 2


def chromium() -> str | None:
    for name in (
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
        "chrome",
        "headless_shell",
    ):
        found = shutil.which(name)
        if found:
            return found
    return None


def test_html_renders_in_headless_chromium(report: Path, tmp_path: Path) -> None:
    exe = chromium()
    if exe is None:
        pytest.skip("no Chromium on this machine (.ci/chromium.sh installs it with apt-get where it can)")
    page = (report / "report.html").resolve().as_uri()
    flags = [
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-dev-shm-usage", f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=10000",
    ]  # fmt: skip
    dom = subprocess.run([exe, *flags, "--dump-dom", page], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    found = re.search(r'<body[^>]*data-images="(\d+)/(\d+)"', dom.stdout)
    assert found, "the page's load script did not run:\n" + dom.stdout[:500]
    loaded, total = int(found.group(1)), int(found.group(2))
    assert total == 5 and loaded == total
    shot = tmp_path / "shot.png"
    done = subprocess.run(
        [exe, *flags, f"--screenshot={shot}", "--window-size=1280,2400", page],
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0 and shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size > 20_000


@pytest.mark.slow
def test_fast_math_and_configs_come_from_the_dispatched_configs(tmp_path: Path) -> None:
    """Regression: ``ktx optimize`` printed no config and no word of fast math, and the report's
    fast-math line read only the pipeline, not the configs the dispatch table runs."""
    out = tmp_path / "run"
    shapes = ("tokens=1,d=4096", "tokens=4096,d=4096")
    result = optimize(
        replace(request(out), rounds=2, trials_per_round=6, shapes=shapes), backend=ModelBackend()
    )
    table = json.loads((out / "final" / "dispatch.json").read_text())
    tuned = table["variants"][0]
    text = render(result)
    assert "| config (dispatched) |" in text
    assert row_of(text, "tokens=1,d=4096").endswith(f"| {config_text(tuned)} |")
    assert "fast-math" not in config_text(tuned)
    assert row_of(text, "tokens=4096,d=4096").endswith("| original |")
    assert "fast-math: no dispatched config switches it on (the spec's build flags already have" in text
    md = make_report(out, tmp_path / "r1").markdown.read_text()
    assert "the fast-math pass was not used; no dispatched config switches it on." in md
    # A dispatched config with FAST_MATH on is reported, whatever the pipeline says.
    table["variants"][0] = {**tuned, "FAST_MATH": 1}
    (out / "final" / "dispatch.json").write_text(json.dumps(table))
    text = render(result)
    assert "FAST_MATH=1 **fast-math**" in row_of(text, "tokens=1,d=4096")
    assert "fast-math: YES, dispatched configs switch it on at tokens=1,d=4096 (FAST_MATH=1)" in text
    md = make_report(out, tmp_path / "r2").markdown.read_text()
    assert "the dispatch table runs it at tokens=1,d=4096 (FAST_MATH=1)." in md


def row_of(text: str, shape: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(f"| {shape} |"))


class PairedModel(ModelBackend):
    """The modelled GPU, able to re-measure: the paired final check gets the model's times with
    a small alternating jitter, so that its intervals are real intervals."""

    def measure_paired(
        self, first: Any, second: Any, point: Any, pairs: int, timeout: float | None
    ) -> list[Any]:
        a, b = self.measure(first, point), self.measure(second, point)

        def jitter(m: Any, i: int) -> Any:
            scale = 1.0 + 0.004 * (i % 2)
            return replace(m, graph=replace(m.graph, median_us=m.graph.median_us * scale))

        return [(jitter(a, i), jitter(b, i + 1)) for i in range(pairs)]


def test_report_and_optimize_quote_the_remeasured_speedup(tmp_path: Path) -> None:
    """Issue 12: ``ktx optimize`` and ``ktx report`` quote the paired final check's speedup with
    its 95% interval, and the tables agree with it."""
    out = tmp_path / "run"
    result = optimize(replace(request(out), rounds=1, trials_per_round=6), backend=PairedModel())
    text = render(result)
    assert "re-measured [95%]" in text and "re-measured: the best config and the original" in text
    intervals = re.findall(r"\| (\d\.\d{3}) \[(\d\.\d{3}), (\d\.\d{3})\] \|", text)
    assert intervals, text
    for estimate, lo, hi in intervals:
        assert float(lo) <= float(estimate) <= float(hi)
    for s in result.shapes:
        if s.paired is not None and s.paired.status == "measured" and s.wins:
            assert s.speedup == pytest.approx(s.paired.speedup), "the quoted speedup is the re-measured one"
            assert s.paired.interval is not None and s.paired.interval.lo > 1.0 + s.min_gain
    md = make_report(out, tmp_path / "r").markdown.read_text()
    assert "re-measured [95%]" in md
    assert any(f"{e} [{lo}, {hi}]" in md for e, lo, hi in intervals)
