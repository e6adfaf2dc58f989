"""Finding a template kernel's instantiation in an nvcc cubin (issue 18, item 5: moe_sum).

CUDA's ``cu++filt`` prints ``void moe_sum_kernel<__nv_bfloat16, (int)2>(T1 *, const T1 *, int)``
and GNU ``c++filt`` prints ``void moe_sum_kernel<__nv_bfloat16, 2>(__nv_bfloat16*, ...)``; both
must lead to the asked-for instantiation when the cubin holds several.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ktx.measure import compile as compiler
from ktx.measure.compile import (
    CompileRequest,
    compile_kernel,
    demangled_head,
    elf_symbols,
    find_nvcc,
    mangled_head,
    mangled_name,
    pick_mangled,
)
from ktx.measure.types import original_candidate
from ktx.spec import load_spec

FIXTURE = Path(__file__).with_name("fixtures") / "moe_sum_host"
M2 = "_Z14moe_sum_kernelI13__nv_bfloat16Li2EEvPT_PKS1_i"
M4 = "_Z14moe_sum_kernelI13__nv_bfloat16Li4EEvPT_PKS1_i"
CUFILT = {  # what CUDA 13.0's cu++filt prints (quoted in issue 18)
    M2: "void moe_sum_kernel<__nv_bfloat16, (int)2>(T1 *, const T1 *, int)",
    M4: "void moe_sum_kernel<__nv_bfloat16, (int)4>(T1 *, const T1 *, int)",
}
GNUFILT = {  # what binutils' c++filt prints
    M2: "void moe_sum_kernel<__nv_bfloat16, 2>(__nv_bfloat16*, __nv_bfloat16 const*, int)",
    M4: "void moe_sum_kernel<__nv_bfloat16, 4>(__nv_bfloat16*, __nv_bfloat16 const*, int)",
}


@pytest.mark.parametrize(
    ("plain", "head"),
    [
        (CUFILT[M2], "moe_sum_kernel<__nv_bfloat16, (int)2>"),
        (GNUFILT[M2], "moe_sum_kernel<__nv_bfloat16, 2>"),
        ("k(float*, int)", "k"),
        (
            "void ns::k<unsigned int, (bool)1, (unsigned int)3>(T1 *)",
            "ns::k<unsigned int, (bool)1, (unsigned int)3>",
        ),
        ("void a::b<c<(int)2>, (long)-1>(int)", "a::b<c<(int)2>, (long)-1>"),
    ],
)
def test_demangled_head_stops_at_the_parameter_list(plain: str, head: str) -> None:
    assert demangled_head(plain) == head


@pytest.mark.parametrize("demangled", [CUFILT, GNUFILT], ids=["cu++filt", "c++filt"])
@pytest.mark.parametrize(("expression", "want"), [("moe_sum_kernel<__nv_bfloat16, 2>", M2),
                                                  ("moe_sum_kernel<__nv_bfloat16,4>", M4)])  # fmt: skip
def test_both_demanglers_pick_the_asked_instantiation(
    demangled: dict[str, str], expression: str, want: str
) -> None:
    hits = [M4, M2]  # the launcher's instantiation first, as in the failing cubin
    assert pick_mangled(hits, [demangled[h] for h in hits], expression) == want


def test_casts_bools_and_suffixes_are_one_spelling() -> None:
    hits = ["_Z1kILb1ELj3EEvv", "_Z1kILb0ELj3EEvv"]
    cu = ["void k<(bool)1, (unsigned int)3>()", "void k<(bool)0, (unsigned int)3>()"]
    gnu = ["void k<true, 3u>()", "void k<false, 3u>()"]
    for demangled in (cu, gnu):
        assert pick_mangled(hits, demangled, "k<true, 3>") == hits[0]
        assert pick_mangled(hits, demangled, "k<false, 3u>") == hits[1]


def test_a_longer_name_or_other_arguments_do_not_match() -> None:
    assert pick_mangled(["_Z2xk"], ["void xk<(int)2>(int)"], "k<2>") is None
    assert pick_mangled([M4], [CUFILT[M4]], "moe_sum_kernel<__nv_bfloat16, 2>") is None
    assert pick_mangled(["_ZN2ns1kILi2EEEvi"], ["void ns::k<(int)2>(int)"], "k<2>") == "_ZN2ns1kILi2EEEvi"


def _fixture_request() -> CompileRequest:
    spec = load_spec(FIXTURE)
    cand = original_candidate(spec)
    return CompileRequest(cand.source, "moe_sum_host_kernel<__nv_bfloat16, 2>", cand.flags, "90",
                          (str(spec.folder),), "auto")  # fmt: skip


@pytest.mark.skipif(not find_nvcc(), reason="no nvcc")
@pytest.mark.parametrize("style", ["cu++filt", "c++filt", "none", "system"])
def test_host_launcher_file_compiles_with_nvcc_and_finds_the_instantiation(
    style: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The fixture keeps its launcher outside ``#ifndef __CUDACC_RTC__``: NVRTC (where present)
    refuses it, nvcc compiles it, and its cubin holds TOPK 2 and 4; the lookup must find 2
    whichever demangler ktx runs (cu++filt's output is modelled where the tool is absent), and
    with none at all (the mangled form is read)."""
    monkeypatch.setenv("KTX_CACHE_DIR", str(tmp_path))
    if style == "system" and not (shutil.which("cu++filt") or shutil.which("c++filt")):
        pytest.skip("no demangler here")
    if style == "none":
        monkeypatch.setattr(compiler, "_demangle", lambda names: list(names))
    elif style != "system":
        fake = {k.replace("moe_sum_kernel", "moe_sum_host_kernel").replace("14moe", "19moe"):
                v.replace("moe_sum_kernel", "moe_sum_host_kernel")
                for k, v in (CUFILT if style == "cu++filt" else GNUFILT).items()}  # fmt: skip
        monkeypatch.setattr(compiler, "_demangle", lambda names: [fake.get(n, n) for n in names])
    result = compile_kernel(_fixture_request())
    assert result.ok, result.log
    assert result.compiler.startswith("nvcc")
    cubin = Path(result.cubin_path).read_bytes()
    kernels = [n for n, info, _ in elf_symbols(cubin) if info & 0xF == 2 and "moe_sum_host_kernel" in n]
    assert sorted(kernels) == sorted([M2.replace("14moe_sum_kernel", "19moe_sum_host_kernel"),
                                      M4.replace("14moe_sum_kernel", "19moe_sum_host_kernel")])  # fmt: skip
    assert result.lowered_name == M2.replace("14moe_sum_kernel", "19moe_sum_host_kernel")
    assert mangled_name(cubin, "moe_sum_host_kernel<__nv_bfloat16, 4>") == M4.replace(
        "14moe_sum_kernel", "19moe_sum_host_kernel"
    )


@pytest.mark.parametrize(
    ("mangled", "head"),
    [
        (M2, "moe_sum_kernel<__nv_bfloat16, 2>"),
        ("_ZN2ns1kILi2EEEvi", "ns::k<2>"),
        ("_Z1kILb1ELj3EEvv", "k<1, 3>"),
        ("_Z1kILin3EEvv", "k<-3>"),
        ("_ZN3a_b6kernelIfLi8EEEvPKT_PS2_i", "a_b::kernel<float, 8>"),
        ("_Z3fooPfi", "foo"),
        ("_Z1kIPfEvv", None),  # a pointer argument: left to the demanglers
        ("foo", None),
    ],
)
def test_mangled_head_reads_the_common_kernel_names(mangled: str, head: str | None) -> None:
    assert mangled_head(mangled) == head


def test_without_any_demangler_the_mangled_form_is_matched() -> None:
    hits = [M4, M2]
    assert pick_mangled(hits, hits, "moe_sum_kernel<__nv_bfloat16, 2>") == M2  # demangler gave names back
    assert pick_mangled(hits, hits, "moe_sum_kernel<__nv_bfloat16, 4>") == M4
    assert pick_mangled(["_Z1kILb1ELj3EEvv"], ["_Z1kILb1ELj3EEvv"], "k<true, 3u>") == "_Z1kILb1ELj3EEvv"
