"""The spec against its source (issue 21, item 3): ``ktx init --check`` refuses the five kinds of
contradiction the issue lists, each with the ``ktx.toml`` line and the source line, and every
shipped spec passes the comparison.

The five fixtures in ``tests/init/contradict/`` each take a suite kernel's source as it is and
contradict it once: roles swapped (silu_and_mul), ``fp32`` for a ``const __half*``
(act_and_mul_scalar), a template argument no launch uses (moe_sum's ``TOPK = 16``), one
``[[args]]`` too many and an argument renamed (silu_and_mul).
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest
from ktx.ir.errors import KtxError

from ktx.check import review
from ktx.cli import main
from ktx.spec import parse_spec
from ktx.speccheck import contradictions
from ktx.specload import load_spec

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "init" / "contradict"
#: The suite's specs and the test fixtures' (the contradicting ones aside).
SUITE = sorted(p.parent for p in (ROOT / "kernels").glob("*/ktx.toml")) + sorted(
    p.parent for p in (ROOT / "tests").rglob("ktx.toml") if FIXTURES not in p.parents
)


def _spec(folder: Path) -> tuple[object, str]:
    text = (folder / "ktx.toml").read_text()
    return parse_spec(text, folder / "ktx.toml"), text


# -- the issue's five contradictions -------------------------------------------------------------

#: fixture -> (kind, ktx.toml line, source file:line, what the message says)
CASES = {
    "swapped_roles": [
        ("role", 11, "silu_and_mul/kernel.cu:87:",
         '[[args]] out is role = "in", but silu_and_mul_kernel stores to out'),
        ("unwritten", 17, "silu_and_mul/kernel.cu:61:",
         '[[args]] input is role = "out", but silu_and_mul_kernel never writes input '
         "(it is a pointer to const)"),
    ],
    "fp32_for_half": [
        ("dtype", 14, "act_and_mul_scalar/kernel.cu:47:",
         '[[args]] input is dtype = "fp32", but act_and_mul_scalar_kernel declares const T* __restrict__ '
         "input, T is __half (fp16)"),
    ],
    "unused_template_arg": [
        ("template", 4, "moe_sum/kernel.cu:70:",
         "template_args[1] = '16': no launch in kernel.cu instantiates moe_sum_kernel's TOPK with it "
         "(the launches give 1, 2, 3, 4, 5, 6, 7, 8)"),
    ],
    "extra_arg": [
        ("args", 24, "silu_and_mul/kernel.cu:61:",
         "[[args]] #4 'eps' is one more than the kernel's parameters: silu_and_mul_kernel takes 3 "
         "parameters (out, input, d)"),
    ],
    "renamed_arg": [
        ("args", 13, "silu_and_mul/kernel.cu:61:",
         "[[args]] #2 is named 'x', but silu_and_mul_kernel's parameter 2 is 'input'"),
    ],
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_contradiction_of_the_issue_is_found_with_both_lines(case: str) -> None:
    spec, text = _spec(FIXTURES / case)
    found = contradictions(spec, text)  # type: ignore[arg-type]
    got = [(c.kind, c.line, c.message) for c in found]
    assert len(found) == len(CASES[case]), got
    for c, (kind, line, cu, message) in zip(found, CASES[case], strict=True):
        assert (c.kind, c.line) == (kind, line), got
        assert message in c.message, c.message
        assert str(c.source).startswith(str(ROOT / "kernels" / cu)) or cu in str(c.source), c.source


@pytest.mark.parametrize("case", sorted(CASES))
def test_check_refuses_each_with_exit_1_and_names_the_lines(
    case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = FIXTURES / case
    assert main(["init", "--check", str(folder)]) == 1
    out = capsys.readouterr().out
    for _kind, line, cu, message in CASES[case]:
        row = next(r for r in out.splitlines() if message in r)
        assert row.startswith(f"{folder / 'ktx.toml'}:{line}: blocks a run: ") and cu in row, row
    assert "ready" not in out
    blockers = review(folder).blockers
    assert [b.line for b in blockers] == [line for _, line, _, _ in CASES[case]]


def test_spec_load_refuses_an_out_the_kernel_never_writes() -> None:
    with pytest.raises(KtxError) as exc:
        load_spec(FIXTURES / "swapped_roles")
    err = exc.value
    assert err.location is not None and (err.location.line, err.location.col) == (17, 1)
    assert "never writes input" in err.message and "kernel.cu:61:" in err.message
    assert err.hint == 'is its role "in"?'
    # the other four load (their contradictions are --check's to list)
    for case in ("fp32_for_half", "unused_template_arg", "extra_arg", "renamed_arg"):
        load_spec(FIXTURES / case)


# -- every shipped spec agrees with its source ----------------------------------------------------


@pytest.mark.parametrize("folder", SUITE, ids=[p.name for p in SUITE])
def test_every_suite_and_fixture_spec_agrees_with_its_source(folder: Path) -> None:
    spec, text = _spec(folder)
    assert contradictions(spec, text) == []  # type: ignore[arg-type]


def _llmc_cuda() -> Path:
    for base in (ROOT, ROOT.parent, ROOT.parent.parent):
        cand = base / "shared" / "llmc" / "dev" / "cuda"
        if (cand / "common.h").is_file():
            return cand
    pytest.skip("llm.c (shared/llmc) is not here")


def test_every_llmc_spec_agrees_with_its_source(tmp_path: Path) -> None:
    cuda = _llmc_cuda()
    path = ROOT / "benchmarks" / "llmc" / "run.py"
    loaded = importlib.util.spec_from_file_location("llmc_run_speccheck", path)
    assert loaded is not None and loaded.loader is not None
    run = importlib.util.module_from_spec(loaded)
    sys.modules["llmc_run_speccheck"] = run
    loaded.loader.exec_module(run)
    checked = 0
    for lad in run.LADDERS:
        for version in (lad.naive, *lad.hand):
            folder = run.stage(lad, version, cuda, tmp_path)
            spec, text = _spec(folder)
            assert contradictions(spec, text) == [], folder.name  # type: ignore[arg-type]
            checked += 1
    assert checked == len(list((ROOT / "benchmarks" / "llmc").glob("*/*/ktx.toml")))


# -- what the comparison does and does not call a contradiction ----------------------------------

SCALE = r"""
#include "types.h"
template <typename T, int VEC>
__global__ void scale(T* __restrict__ out, const T* __restrict__ in, real_t alpha, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * alpha;
}
template <typename T>
void launch(T* out, const T* in, float alpha, unsigned n) {
  scale<T, 4><<<(n + 255) / 256, 256>>>(out, in, alpha, n);
}
template void launch<float>(float*, const float*, float, unsigned);
template void launch<double>(double*, const double*, float, unsigned);
"""

HEADER = """#pragma once
#if defined(USE_DOUBLE)
typedef double real_t;
#else
typedef float real_t;
#endif
"""

SCALE_SPEC = """
kernel = "scale"
template_args = ["TARG", "{vec}"]

[[args]]
name = "out"
dtype = "OUT_DTYPE"
shape = "[n]"
role = "OUT_ROLE"

[[args]]
name = "in"
dtype = "OUT_DTYPE"
shape = "[n]"
role = "in"

[[args]]
name = "alpha"
dtype = "fp32"
value = "1.5"

[[args]]
name = "n"
dtype = "int32"
value = "n"

[shapes]
default = [{ n = 4096, vec = 4 }, { n = 8192, vec = VEC2 }]

[launch]
grid = ["cdiv(n, 256)"]
block = ["256"]
"""


def _scale(
    tmp_path: Path, targ: str = "float", dtype: str = "fp32", role: str = "out", vec2: int = 4
) -> list[str]:
    folder = tmp_path / "scale"
    folder.mkdir(exist_ok=True)
    (folder / "kernel.cu").write_text(SCALE)
    (folder / "types.h").write_text(HEADER)
    text = (
        SCALE_SPEC.replace("TARG", targ).replace("OUT_DTYPE", dtype).replace("OUT_ROLE", role)
        .replace("VEC2", str(vec2))
    )  # fmt: skip
    (folder / "ktx.toml").write_text(text)
    spec = parse_spec(text, folder / "ktx.toml")
    return [c.message for c in contradictions(spec, text)]


def test_typedefs_launcher_instantiations_and_unsigned_sizes_agree(tmp_path: Path) -> None:
    # real_t is float (USE_DOUBLE is not defined); unsigned n as int32 is the same four bytes;
    # T is float or double by the launcher's explicit instantiations; VEC is 4 at every point
    assert _scale(tmp_path) == []
    assert _scale(tmp_path, "double", "fp64") == []


def test_a_template_value_that_names_a_shape_variable_is_checked_at_every_point(tmp_path: Path) -> None:
    (msg,) = _scale(tmp_path, vec2=8)
    assert "template_args[1] = '{vec}' (8): no launch in kernel.cu instantiates scale's VEC" in msg


def test_a_type_the_launcher_never_instantiates_and_its_dtypes(tmp_path: Path) -> None:
    found = _scale(tmp_path, "__half", "fp16")
    assert any("template_args[0] = '__half'" in m and "the launches give double, float" in m for m in found)
    # dtypes follow the spec's own T: fp16 for __half agrees
    assert not any("dtype" in m for m in found)
    (dtype,) = _scale(tmp_path, "float", "bf16")[:1]
    assert (
        '[[args]] out is dtype = "bf16", but scale declares T* __restrict__ out, T is float (fp32)' in dtype
    )


def test_a_scalar_of_the_wrong_kind_and_an_unknown_type(tmp_path: Path) -> None:
    folder = tmp_path / "scale"
    _scale(tmp_path)
    text = (
        (folder / "ktx.toml")
        .read_text()
        .replace('name = "alpha"\ndtype = "fp32"', 'name = "alpha"\ndtype = "int32"')
    )
    found = [c.message for c in contradictions(parse_spec(text, folder / "ktx.toml"), text)]
    assert found == [
        '[[args]] alpha is dtype = "int32", but scale declares real_t alpha (by value), '
        "real_t is float (fp32)"
    ]
    # a type ktx has no dtype for (a struct, a vector type) is no finding
    (folder / "types.h").write_text("struct real_t { float v; };\n")
    assert contradictions(parse_spec(text, folder / "ktx.toml"), text) == []


def test_an_out_written_only_through_a_helper_counts_as_written(tmp_path: Path) -> None:
    # silu_and_mul writes out through Pack<T>::store(out_row + ...) besides its scalar tail; a
    # helper taking a non-const pointer may write it
    folder = tmp_path / "helper"
    folder.mkdir()
    (folder / "kernel.cu").write_text(
        "__device__ void put(float* p, float v) { *p = v; }\n"
        "__global__ void k(float* out, const float* in, int n) {\n"
        "  int i = threadIdx.x; if (i < n) put(out + i, in[i]); }\n"
    )
    spec_text = (
        'kernel = "k"\n[[args]]\nname = "out"\ndtype = "fp32"\nshape = "[n]"\nrole = "out"\n'
        '[[args]]\nname = "in"\ndtype = "fp32"\nshape = "[n]"\nrole = "in"\n'
        '[[args]]\nname = "n"\ndtype = "int32"\nvalue = "n"\n'
        '[shapes]\ndefault = [{ n = 32 }]\n[launch]\ngrid = ["1"]\nblock = ["32"]\n'
    )
    (folder / "ktx.toml").write_text(spec_text)
    assert contradictions(parse_spec(spec_text, folder / "ktx.toml"), spec_text) == []
    # the same out declared in: only a store the analysis reads proves a write, so no finding
    as_in = spec_text.replace('role = "out"', 'role = "in"', 1)
    assert contradictions(parse_spec(as_in, folder / "ktx.toml"), as_in) == []
    # and an out the kernel hands only to a helper taking a pointer to const is never written
    (folder / "kernel.cu").write_text(
        "__device__ float get(const float* p) { return *p; }\n"
        "__global__ void k(float* out, const float* in, int n) {\n"
        "  int i = threadIdx.x; float s = 0.f; if (i < n) s = get(out + i) + in[i]; }\n"
    )
    (found,) = contradictions(parse_spec(spec_text, folder / "ktx.toml"), spec_text)
    assert found.kind == "unwritten" and "no store reaches it, nor a call that may write" in found.message


def test_a_type_template_parameter_bound_to_a_pointer_is_a_buffer(tmp_path: Path) -> None:
    # llm-awq's quant_kernel<T, scale_type, ...> launched with scale_type = at::Half *: the spec
    # gives scale a shape and role, and the kernel's store through it is read as a write
    folder = tmp_path / "bound"
    folder.mkdir()
    (folder / "kernel.cu").write_text(
        "template <typename T, typename S>\n"
        "__global__ void k(const T* x, S scale, int n) {\n"
        "  int i = threadIdx.x; if (i < n) scale[i] = x[i] * 2.f; }\n"
    )
    spec_text = (
        'kernel = "k"\ntemplate_args = ["float", "float *"]\n'
        '[[args]]\nname = "x"\ndtype = "fp32"\nshape = "[n]"\nrole = "in"\n'
        '[[args]]\nname = "scale"\ndtype = "fp32"\nshape = "[n]"\nrole = "out"\n'
        '[[args]]\nname = "n"\ndtype = "int32"\nvalue = "n"\n'
        '[shapes]\ndefault = [{ n = 32 }]\n[launch]\ngrid = ["1"]\nblock = ["32"]\n'
    )
    (folder / "ktx.toml").write_text(spec_text)
    assert contradictions(parse_spec(spec_text, folder / "ktx.toml"), spec_text) == []
    # bound to a scalar type, the same parameter is a value: a shape for it is a contradiction
    by_value = spec_text.replace('"float *"', '"float"')
    (found,) = contradictions(parse_spec(by_value, folder / "ktx.toml"), by_value)
    said = "[[args]] scale is an array (it has a shape), but the kernel takes S scale by value"
    assert said in found.message


def test_a_suite_folder_with_roles_swapped_fails_check_through_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "rmsnorm"
    shutil.copytree(ROOT / "kernels" / "rmsnorm", folder)
    text = (folder / "ktx.toml").read_text()
    assert text.count('role = "out"') == 1
    (folder / "ktx.toml").write_text(text.replace('role = "out"', 'role = "in"'))
    assert main(["init", "--check", str(folder)]) == 1
    out = capsys.readouterr().out
    assert 'output is role = "in", but rmsnorm_kernel stores to output' in out
