"""``ktx apply``: template, --knobs, --config, --sample, --diff, -o, --trace; errors exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ktx.cli import main
from ktx.template import Template, Trace

ROOT = Path(__file__).resolve().parents[2]
SILU = ROOT / "kernels" / "silu_and_mul" / "kernel.cu"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_prints_the_template_and_remarks(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "apply", "--passes", "split,unroll", str(SILU))
    assert code == 0
    assert "// ktx:knobs begin" in out and "dim3 grid(num_tokens, KTX_SPLIT);" in out
    assert f"{SILU}:60: remark: [split] silu_and_mul_kernel: rewritten: exposed SPLIT" in err
    assert "remark: [unroll] L1: skipped: already fully unrolled" in err


def test_knobs_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "apply", "--passes", "block-size,launch-bounds", str(SILU), "--knobs", "-q")
    assert code == 0
    data = json.loads(out)
    assert [(k["name"], k["values"][:3], k["default"]) for k in data["knobs"]] == [
        ("BLOCK_X", [0, 32, 64], 0),
        ("MIN_BLOCKS", [0, 1, 2], 0),
    ]
    assert data["constraints"] == ["MIN_BLOCKS == 0 or BLOCK_X > 0", "MIN_BLOCKS * BLOCK_X <= 2048"]
    assert data["launch"]["block"] == ["BLOCK_X if BLOCK_X else max(1, min(d // (16 // 2), 256))"]
    assert data["name_expression"] == "silu_and_mul_kernel<__nv_bfloat16>"


def test_config_instantiates_and_missing_knobs_take_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "apply", "--passes", "split,unroll", str(SILU), "--config", "SPLIT=16", "-q")
    assert code == 0
    assert "KTX_" not in out and "dim3 grid(num_tokens, 16);" in out
    assert "// ktx: `split,unroll` instantiated with SPLIT=16, UNROLL_L0=1, UNROLL_L2=1" in out


def test_sample_is_repeatable_and_feasible(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("apply", "--passes", "block-size,launch-bounds", str(SILU), "--sample", "7", "-q")
    code, first, _ = run(capsys, *args)
    _, second, _ = run(capsys, *args)
    assert code == 0 and first == second and "KTX_" not in first


def test_diff_output_and_trace_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "trace.json"
    out_file = tmp_path / "out.diff"
    code, out, _ = run(
        capsys,
        "apply",
        "--passes",
        "tile",
        str(SILU),
        "--diff",
        "--trace",
        str(trace),
        "-o",
        str(out_file),
        "-q",
    )
    assert code == 0 and out == ""
    diff = out_file.read_text()
    assert diff.startswith(f"--- {SILU}\n+++ {SILU}\n")
    assert "+  for (int ktx_tile_L0 = threadIdx.x;" in diff
    loaded = Template.from_trace(SILU.read_text(), Trace.from_json(json.loads(trace.read_text())))
    assert [k.name for k in loaded.knobs] == ["TILE_L0", "TILE_L2"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--passes", "unrol"), "unknown pass 'unrol' (did you mean 'unroll'? passes: block-size"),
        (("--passes", "tile{size=2}"), "pass 'tile' has no option 'size' (options: sizes (ints"),
        (
            ("--passes", "unroll", "--config", "UNROLL_L0=3"),
            "3 is not a value of knob UNROLL_L0 (UNROLL_L0 takes",
        ),
        (("--passes", "unroll", "--config", "NOPE=1"), "no knob 'NOPE' (knobs: UNROLL_L0, UNROLL_L2)"),
        (("--passes", "unroll", "--config", "UNROLL_L0"), "--config 'UNROLL_L0' is not NAME=VALUE"),
        (
            ("--passes", "block-size,launch-bounds", "--config", "BLOCK_X=1024", "MIN_BLOCKS=3"),
            "config breaks constraint 'MIN_BLOCKS * BLOCK_X <= 2048' (BLOCK_X=1024, MIN_BLOCKS=3)",
        ),
        (("--passes", "split,coarsen"), "passes 'split' and 'coarsen' conflict"),
    ],
)
def test_errors_exit_2_with_one_line(
    argv: tuple[str, ...], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "apply", str(SILU), "-q", *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("ktx: error: ") and message in err


def test_missing_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "apply", "--passes", "unroll", str(tmp_path / "none.cu"))
    assert code == 2 and "no such file" in err


TWO_KERNELS = (
    b"__global__ void good(float* y, int n) {\n"
    b"  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) y[i] = 1.f;\n}\n"
    b"__global__ void bad(float* y) {\n  y[0] = = 2.f;\n}\n"
    b"void go(float* y, int n) { good<<<(n + 127) / 128, 128>>>(y, n); }\n"
)


def test_syntax_error_in_the_kernel_asked_for_is_exit_2_with_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "two.cu"
    path.write_bytes(TWO_KERNELS)
    code, out, err = run(capsys, "apply", "--passes", "coarsen", "--kernel", "bad", str(path))
    assert code == 2 and out == ""
    assert f"{path}:6:" in err and "inside kernel 'bad'" in err


def test_another_kernels_syntax_error_does_not_refuse_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "two.cu"
    path.write_bytes(TWO_KERNELS)
    code, out, _ = run(capsys, "apply", "--passes", "coarsen", "--kernel", "good", "--knobs", "-q", str(path))
    assert code == 0 and [k["name"] for k in json.loads(out)["knobs"]] == ["COARSEN"]
