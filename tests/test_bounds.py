"""Static bounds (:mod:`ktx.bounds`) and ``ktx init --check``: issue 18's wrong specs are
errors naming the access's line, the buffer and the shape point; what cannot be bounded is
listed as not proven; invalid launches and oversized points are flagged; the suite's own
specs check clean."""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from ktx.ir.affine import Affine
from ktx.ir.errors import KtxError
from ktx.ir.facts.intervals import Range, splits

from ktx.bounds import Launch, check_spec, launch_problems
from ktx.check import review
from ktx.cli import main
from ktx.draft import draft
from ktx.spec import parse_spec
from ktx.specload import load_spec

ROOT = Path(__file__).resolve().parents[1]
FOREIGN = ROOT / "tests" / "init" / "foreign"


def folder(tmp_path: Path, name: str, edits: dict[str, str] | None = None, source: str = "") -> Path:
    """A kernel folder with ``name``'s draft (``source`` given: a new kernel file), edited."""
    out = tmp_path / name
    out.mkdir()
    src = FOREIGN / f"{name}.cu"
    if source:
        src = out / "kernel.cu"
        src.write_text(source)
    text = draft(src, None, out).text
    for old, new in (edits or {}).items():
        assert old in text, old
        text = text.replace(old, new)
    (out / "ktx.toml").write_text(text)
    return out


# -- intervals ---------------------------------------------------------------------------------


def test_interval_division_and_remainder_are_c_semantics() -> None:
    assert Range(0, 4095).div(Range(64, 64)) == Range(0, 63)
    assert Range(-7, 7).div(Range(2, 2)) == Range(-3, 3)
    assert Range(0, 10).div(Range(-1, 1)) is None
    assert Range(0, 4095).mod(Range(64, 64)) == Range(0, 63)
    assert Range(0, 5).mod(Range(64, 64)) == Range(0, 5)
    assert Range(-5, 5).mod(Range(4, 4)) == Range(-3, 3)
    assert Range(2, 3) * Range(-1, 4) == Range(-3, 12)


def test_an_index_splits_around_a_guarded_part_with_a_symbolic_multiple() -> None:
    i = Affine.sym("blockDim.x") * Affine.sym("blockIdx.x") + Affine.sym("threadIdx.x")
    index = Affine.sym("C") * i + Affine.sym("j")
    found = [(str(c), str(rest)) for c, rest in splits(index, i)]
    assert ("C", "j") in found


def test_launch_limits() -> None:
    assert launch_problems(Launch((4,), (256,), 0)) == []
    assert launch_problems(Launch((0,), (256,), 0)) == ["grid (0,) has no blocks"]
    assert launch_problems(Launch((4,), (4096, 16), 0)) == [
        "block (4096, 16) is 65,536 threads (at most 1024)"
    ]
    # ktx's harness opts in past 48 KiB: sm_90's 227 KiB is the limit.
    assert launch_problems(Launch((4,), (256,), 64 * 1024)) == []
    (smem,) = launch_problems(Launch((4,), (256,), 240 * 1024))
    assert smem == "245,760 bytes of dynamic shared memory: over the 227 KiB a block gets on sm_90 (opted in)"
    (smem,) = launch_problems(Launch((4,), (256,), 64 * 1024), opt_in=False)
    assert "65,536 bytes of dynamic shared memory: over the 48 KiB a block gets without opting in" in smem


# -- issue 18's wrong specs ------------------------------------------------------------------


def test_a_grid_bounded_extent_under_a_grid_stride_loop_is_an_error(tmp_path: Path) -> None:
    # The draft: out and input sized by the grid (256 rows) while the loop walks 4096.
    wrong = "(num_tokens if num_tokens < 256 else 256)"
    out = folder(
        tmp_path,
        "moe_sum_while",
        {
            'shape = "[num_tokens, d]"': f'shape = "[{wrong}, d]"',
            'shape = "[num_tokens, 2 * d]"': f'shape = "[{wrong}, 2 * d]"',
        },
    )
    report = check_spec(parse_spec((out / "ktx.toml").read_text(), out / "ktx.toml"))
    errors = [f for f in report.errors if f.kind == "out_of_bounds"]
    assert {f.buffer for f in errors} == {"out", "input"}
    first = next(f for f in errors if f.buffer == "out")
    assert first.location is not None and first.location.path.endswith("moe_sum_while.cu")
    assert first.location.line == 14 and first.point == "num_tokens=4096,d=64"
    # The witness: block 0, thread 0, the grid-stride loop's second token (256 = the rows).
    assert first.message.startswith("store row[i] reaches element 16,384 but out has 16,384 elements")
    assert first.message.endswith(
        "at num_tokens=4096,d=64: blockIdx=(0, 0, 0) threadIdx=(0, 0, 0) token=256 i=0 (index 16,384)"
    )
    assert report.unproven == ()
    # Loading the spec (every command) refuses it, at the buffer's shape line.
    with pytest.raises(KtxError) as caught:
        load_spec(out)
    assert caught.value.location is not None and caught.value.location.line == 8
    assert "moe_sum_while.cu:14:" in caught.value.message and "num_tokens=4096" in caught.value.message
    assert main(["init", "--check", str(out)]) == 1


def test_the_right_extent_is_ready(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = folder(tmp_path, "moe_sum_while")
    assert main(["init", "--check", str(out)]) == 0
    assert "ready (the spec loads; every access is in bounds at its 4 shape points" in capsys.readouterr().out


def test_dynamic_shared_memory_dropped_is_an_error(tmp_path: Path) -> None:
    out = folder(tmp_path, "rmsnorm_dyn_smem", {'shared = "min(max(d // 256, 1), 32) * 4"': 'shared = "0"'})
    errors = review(out).blockers
    assert errors and all("red[" in b.message for b in errors), errors
    assert "reaches element 0 but red has 0 elements (its shared memory)" in errors[0].message


def test_a_launcher_local_taken_for_a_shape_variable_gives_invalid_launches(tmp_path: Path) -> None:
    edits = {
        'gpb = "16 if': 'gpx = "16 if',
        'value = "gpb"': 'value = "gpb"',
        "hidden = [64, 4096] }": "hidden = [64, 4096], gpb = [64, 4096] }",
        "hidden = 64 }": "hidden = 64, gpb = 64 }",
    }
    out = folder(tmp_path, "group_quant_int8", edits)
    messages = [b.message for b in review(out).blockers]
    assert any("is 65,536 threads (at most 1024)" in m for m in messages), messages
    assert any("has no blocks" in m for m in messages), messages


def test_a_data_dependent_index_is_not_proven_and_not_ready(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = (
        "__global__ void gather(float* out, const float* table, const int* idx, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (i < n) out[i] = table[idx[i]];\n}\n"
        "void go(float* out, const float* table, const int* idx, int n) {\n"
        "  gather<<<(n + 255) / 256, 256>>>(out, table, idx, n);\n}\n"
    )
    todo = "# TODO: extent of table: indexed as table[idx[i]] (looked at the kernel's subscripts and bounds)"
    values = (
        "# TODO: values of idx: indices (table[idx[i]]); random ones may be negative or too large: "
        'draw them in range, dist = "int:0..N" (or "distinct:0..N" where no two may share one)'
    )
    edits = {f'{todo}\nshape = "[TODO]"': 'shape = "[n]"', f'{values}\ndist = "TODO"': 'dist = "int:0..n"'}
    out = folder(tmp_path, "gather", edits, source)
    result = review(out)
    assert result.blockers == ()
    assert [f.buffer for f in result.unproven] == ["table"]
    assert main(["init", "--check", str(out)]) == 0
    text = capsys.readouterr().out
    assert "not proven in bounds: " in text and "kernel.cu:3:23: table[idx[i]]: cannot bound" in text
    assert "ready" not in text


def test_buffers_over_a_quarter_of_device_memory_are_flagged(tmp_path: Path) -> None:
    out = folder(tmp_path, "gelu_and_mul", {"num_tokens = [64, 4096]": "num_tokens = [64, 4194304]"})
    report = check_spec(load_spec(out))
    (memory,) = [f for f in report.errors if f.kind == "memory"]
    assert memory.point == "d=4096,num_tokens=4194304"
    assert "the buffers take 103.1 GB, over a quarter of the device's 80 GB" in memory.message


def test_check_names_a_kernel_the_file_does_not_define(tmp_path: Path) -> None:
    out = folder(tmp_path, "gelu_and_mul", {'kernel = "gelu_and_mul_kernel"': 'kernel = "gelu_kernel"'})
    (blocker,) = review(out).blockers
    assert blocker.line == 2
    assert re.fullmatch(
        r"kernel: .*gelu_and_mul\.cu defines no kernel 'gelu_kernel' "
        r"\(kernels in .*gelu_and_mul\.cu: gelu_and_mul_kernel\)",
        blocker.message,
    ), blocker.message


def test_check_refuses_an_integer_shape(tmp_path: Path) -> None:
    out = folder(tmp_path, "gelu_and_mul", {'shape = "[num_tokens, d]"': "shape = 5"})
    (blocker,) = review(out).blockers
    assert blocker.line == 10
    assert (
        blocker.message == 'args.out.shape is a int (5) where a list of extents belongs (write shape = "[5]")'
    )


@pytest.mark.parametrize("name", sorted(p.parent.name for p in (ROOT / "kernels").glob("*/ktx.toml")))
def test_the_suite_specs_have_no_bounds_errors(name: str) -> None:
    report = check_spec(load_spec(ROOT / "kernels" / name))
    assert report.errors == (), [str(f) for f in report.errors]
    # Where something is not proven, it names the access and why.
    for f in report.unproven:
        assert f.location is not None and f.location.line > 0
        assert "cannot bound" in f.message or "not proven: bounded by" in f.message


def test_a_pointer_the_kernel_moves_is_not_proven(tmp_path: Path) -> None:
    # x += row * d: the subscript x[i] is relative to the moved base; not bounded as if it were not.
    source = (
        "__global__ void k(float* x, int d) {\n  x += blockIdx.x * d;\n"
        "  for (int i = threadIdx.x; i < d; i += blockDim.x) x[i] *= 2.f;\n}\n"
        "void go(float* x, int rows, int d) { k<<<rows, 256>>>(x, d); }\n"
    )
    # (the draft reads [rows, d] from the move since session 11; a person writes [d] here)
    out = folder(tmp_path, "moved", {'shape = "[rows, d]"': 'shape = "[d]"'}, source)
    result = review(out)
    assert result.blockers == ()
    (f,) = result.unproven
    assert "cannot bound x (the kernel moves the pointer at line 2)" in f.message


def test_a_guard_bounds_the_variable_a_quotient_and_remainder_come_from(tmp_path: Path) -> None:
    # llm.c's crossentropy: b = i / T, t = i % T under if (i < B * T): b * T + t < B * T.
    source = (
        "__global__ void k(float* out, const float* x, int B, int T) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (i < B * T) {\n    int b = i / T;\n    int t = i % T;\n"
        "    out[b * T + t] = x[b * T + t];\n  }\n}\n"
        "void go(float* out, const float* x, int B, int T) {\n"
        "  k<<<(B * T + 255) / 256, 256>>>(out, x, B, T);\n}\n"
    )
    out = folder(tmp_path, "quotient", {"T = [64, 4096]": "T = [63, 4095]"}, source)
    assert review(out).blockers == () and review(out).unproven == ()


def test_a_buffer_handed_to_a_call_is_not_proven(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # DeepSpeed's fake quantizer loads 16 bytes through a helper: the subscripts the analysis
    # sees are all on registers, so without this --check said every access was in bounds.
    source = (
        "template <int B> __device__ void load(float* dst, const float* src) {"
        " for (int j = 0; j < B / 4; j++)"
        " dst[j] = src[j]; }\n"
        "__global__ void k(float* vals, int group_size) {\n  float data[4];\n"
        "  for (int t = threadIdx.x * 4; t < group_size; t += blockDim.x * 4) {\n"
        "    load<16>(data, vals + blockIdx.x * group_size + t);\n"
        "    data[0] = reinterpret_cast<float*>(data)[1]; }\n}\n"
        "void go(float* vals, int total, int groups) { k<<<groups, 32>>>(vals, total / groups); }\n"
    )
    out = folder(tmp_path, "escape", {}, source)
    text = (out / "ktx.toml").read_text()
    # its extent from the address handed to the helper (rows of group_size = total / groups)
    assert 'shape = "[groups, (total // groups)]"' in text
    # vals is only read (handed to a helper named load): drafted "in"; "inout" would be refused
    # as never written (ktx/speccheck.py)
    assert 'role = "in"' in text
    text = text.replace('shape = "[groups, (total // groups)]"', 'shape = "[total]"')
    (out / "ktx.toml").write_text(text)
    result = review(out)
    assert result.blockers == ()
    (f,) = result.unproven
    assert f.buffer == "vals"
    assert "vals + blockIdx.x * group_size + t: cannot bound what load does through vals" in f.message
    assert f.location is not None and f.location.line == 5
    assert main(["init", "--check", str(out)]) == 0
    assert "every access is in bounds" not in capsys.readouterr().out


# -- issue 21: a bound is not a reachable index ------------------------------------------------

BOUNDS_KERNELS = ROOT / "tests" / "ir" / "bounds"
QUANT_SPEC = """\
kernel = "group_quant_int8_strided"
source = "kernel.cu"

[vars]
num_groups = "tokens * hidden // 128"

[[args]]
name = "in"
dtype = "bf16"
shape = "[tokens, hidden]"
role = "in"

[[args]]
name = "out"
dtype = "int8"
shape = "[tokens, hidden]"
role = "out"

[[args]]
name = "scales"
dtype = "fp32"
shape = "[num_groups]"
role = "out"

[[args]]
name = "group_size"
dtype = "int32"
value = "128"

[[args]]
name = "num_groups"
dtype = "int32"
value = "num_groups"

[shapes]
default = { product = { tokens = [1, 4, 64], hidden = [1536, 7168] } }

[launch]
grid = ["(num_groups + 15) // 16"]
block = ["256"]
"""


def quantiser(tmp_path: Path, source: str) -> Path:
    out = tmp_path / source.removesuffix(".cu")
    out.mkdir()
    (out / "kernel.cu").write_text((BOUNDS_KERNELS / source).read_text())
    (out / "ktx.toml").write_text(QUANT_SPEC)
    return out


def test_the_strided_pack_loads_and_is_listed_as_not_proven(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 21's kernel: i <= 127 plus the 8-wide pack was taken for element 1,542 of 1,536
    # and the spec refused to load; the last load of a group starts at 120.
    out = quantiser(tmp_path, "group_quant_strided.cu")
    spec = load_spec(out)
    report = check_spec(spec)
    assert report.errors == ()
    bounded = [f for f in report.unproven if f.buffer == "in"]
    assert bounded and all("not proven: bounded by elements" in f.message for f in bounded)
    assert "bounded by elements 0..1,542 of in's 1,536" in bounded[0].message
    assert main(["init", "--check", str(out)]) == 0
    assert "not proven in bounds: " in capsys.readouterr().out


def test_a_truly_out_of_bounds_kernel_is_refused_with_its_witness(tmp_path: Path) -> None:
    out = quantiser(tmp_path, "group_quant_overrun.cu")
    with pytest.raises(KtxError) as caught:
        load_spec(out)
    message = caught.value.message
    assert caught.value.location is not None and caught.value.location.line == 10  # in's shape
    assert "kernel.cu:15:" in message  # the .cu line of the load
    assert (
        "load *reinterpret_cast<const uint4*>(src + i) reaches element 1,543 but in has 1,536 elements "
        "(shape [tokens, hidden]) at tokens=1,hidden=1536: blockIdx=(0, 0, 0) threadIdx=(176, 0, 0) "
        "i=128 (index 1,536, 8 elements)"
    ) in message
    assert main(["init", "--check", str(out)]) == 1


def _llmc_run() -> ModuleType:
    """benchmarks/llmc/run.py, which stages an llm.c version into a kernel folder."""
    loaded = importlib.util.spec_from_file_location(
        "llmc_run_bounds", ROOT / "benchmarks" / "llmc" / "run.py"
    )
    assert loaded is not None and loaded.loader is not None
    run = importlib.util.module_from_spec(loaded)
    sys.modules["llmc_run_bounds"] = run
    loaded.loader.exec_module(run)
    return run


LLMC = _llmc_run()
LLMC_VERSIONS = [(lad, v) for lad in LLMC.LADDERS for v in (lad.naive, *lad.hand)]


@pytest.mark.parametrize(
    ("ladder", "version"), LLMC_VERSIONS, ids=[f"{lad.name}-{v}" for lad, v in LLMC_VERSIONS]
)
def test_every_llmc_spec_loads_without_a_blocking_bounds_error(
    ladder: Any, version: str, tmp_path: Path
) -> None:
    # Issue 21's goal, with test_the_suite_specs_have_no_bounds_errors: no correct kernel blocked.
    roots = (ROOT / "shared" / "llmc", ROOT.parent / "shared" / "llmc", ROOT.parents[1] / "shared" / "llmc")
    cuda = next((c / "dev" / "cuda" for c in roots if (c / "dev" / "cuda" / "common.h").is_file()), None)
    if cuda is None:
        pytest.skip("llm.c (shared/llmc) is not here")
    spec = load_spec(LLMC.stage(ladder, version, cuda, tmp_path))
    assert [str(f) for f in check_spec(spec).errors if f.kind == "out_of_bounds"] == []


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at top level or inside a function (ast: comments and
    strings do not count)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


def test_the_spec_and_the_bounds_check_import_each_other_no_more() -> None:
    # spec.py refuses an out-of-bounds spec through the analysis layer (ktx.ir.facts.extents),
    # not through ktx.bounds, which reads specs: the bounds <-> spec cycle is gone.
    assert not any(m.startswith("ktx.bounds") for m in _imports(ROOT / "ktx" / "spec.py"))
    assert "ktx.spec" in _imports(ROOT / "ktx" / "bounds.py")
    for name in ("intervals", "witness", "lanes", "extents"):
        above = {
            m
            for m in _imports(ROOT / "ir" / "facts" / f"{name}.py")
            if m.startswith("ktx.") and not m.startswith("ktx.ir")
        }
        assert above <= {"ktx.ir.errors"}, (name, above)
