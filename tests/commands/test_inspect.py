"""``ktx inspect``: listings for the suite and one-line errors with exit 2 for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ktx.cli import main

ROOT = Path(__file__).resolve().parents[2]
SUITE = sorted((ROOT / "kernels").glob("*/kernel.cu"))


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("path", SUITE, ids=[p.parent.name for p in SUITE])
def test_suite_kernels_are_listed_with_their_launch(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "inspect", "--json", str(path))
    assert code == 0
    info = json.loads(out)
    assert info["kernels"], "every suite file defines a kernel"
    kernel_names = {k["name"] for k in info["kernels"]}
    launched = {s["kernel"] for s in info["launch_sites"]}
    assert launched and launched <= kernel_names, "the host launcher launches the file's kernels"
    assert not [d for d in info["diagnostics"] if d["severity"] == "error"]


def test_text_listing_names_loops_and_perf_constants(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "k.cu"
    src.write_text(
        "#define THREADS 256\n"
        "template <int VEC> __global__ void k(float* x, int n) {\n"
        "  #pragma unroll 4\n"
        "  for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] *= 2.f;\n"
        "}\n"
        "void go(float* x, int n) { k<4><<<n / THREADS, THREADS>>>(x, n); }\n"
    )
    code, out, _ = run(capsys, "inspect", str(src))
    assert code == 0
    assert "kernel k (line 2) template<value VEC>" in out
    assert "loop L0 for line 4: (int i = threadIdx.x; i < n; i += blockDim.x)  #pragma unroll 4" in out
    assert "launch k<4><<<n / THREADS, THREADS>>>" in out
    assert "perf constant THREADS = 256 (define, line 1; used in launch)" in out
    assert "perf constant VEC = 4 (template-int" in out


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (None, "no such file"),
        (b"", "empty file"),
        (b"\x7fELF\x00\x00\x01", "binary file"),
        (b"int main() { return 0; }\n", "no __global__ kernel found"),
        (b"__global__ void k(float* x) {\n  x[0] = (1 + ;\n}\n", "inside kernel 'k'"),
        (b"\xff\xfe bad", "not valid UTF-8"),
    ],
    ids=["missing", "empty", "binary", "no-kernel", "syntax-in-kernel", "not-utf8"],
)
def test_bad_input_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes | None, needle: str
) -> None:
    path = tmp_path / "bad.cu"
    if content is not None:
        path.write_bytes(content)
    code, out, err = run(capsys, "inspect", str(path))
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    assert lines[0].startswith(f"ktx: error: {path}")
    assert needle in lines[0]


def test_syntax_error_position_is_line_and_column(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.cu"
    path.write_bytes(b"__global__ void k(float* x) {\n  x[0] = (1 + ;\n}\n")
    _, _, err = run(capsys, "inspect", str(path))
    assert f"{path}:2:" in err


def test_debug_shows_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--debug", "inspect", str(tmp_path / "nope.cu"))
    assert code == 2 and "Traceback" in err


def test_a_kernel_that_does_not_parse_is_skipped_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "two.cu"
    path.write_bytes(
        b"__global__ void good(float* y, int n) { if (threadIdx.x < n) y[threadIdx.x] = 1.f; }\n"
        b"__global__ void bad(float* y) {\n  y[0] = = 2.f;\n}\n"
    )
    code, out, _ = run(capsys, "inspect", str(path))
    assert code == 0
    assert "  kernel good (line 1)\n    param y: float*  [ptr]" in out
    assert "  kernel bad (line 2): skipped, syntax error at line 3:" in out
    code, out, _ = run(capsys, "inspect", "--json", str(path))
    info = json.loads(out)
    skipped = [k.get("skipped", "").startswith("syntax error at line 3") for k in info["kernels"]]
    assert skipped == [False, True]
