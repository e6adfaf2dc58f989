"""Why a compile went to nvcc is recorded as what NVRTC said: session 9's real-code files were
counted under "NVRTC rejected an option" (921 s), while the option was dropped and NVRTC then failed
on their host headers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ktx.measure import compile as compiler
from ktx.measure.compile import CompileRequest, compile_kernel

REQ = CompileRequest("__global__ void k(int* x) { x[0] = 1; }\n", "k", ("--expt-relaxed-constexpr",), "90")


def nvrtc_then(second: str) -> Any:
    calls: list[tuple[str, ...]] = []

    def fake(req: CompileRequest, flags: tuple[str, ...]) -> Any:
        calls.append(tuple(flags))
        if len(calls) == 1:
            raise compiler._NvrtcFailure(
                "NVRTC_ERROR_INVALID_OPTION (5)\n"
                "nvrtc: error: unrecognized option --expt-relaxed-constexpr found",
                True,
            )
        raise compiler._NvrtcFailure(f"NVRTC_ERROR_COMPILATION (6)\n{second}", False)

    return fake, calls


@pytest.mark.parametrize(
    ("log", "kind"),
    [
        ('x.h(11): catastrophic error: cannot open source file "cstdint"', "NVRTC cannot take host code"),
        (
            "c++config.h(309): error: ... host functions are not allowed in JIT mode",
            "NVRTC cannot take host code",
        ),
        ("kernel.cu(1): error: identifier y is undefined", "NVRTC failed"),
    ],
)
def test_the_fallback_names_nvrtcs_last_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, log: str, kind: str
) -> None:
    monkeypatch.setenv("KTX_CACHE_DIR", str(tmp_path))
    fake, calls = nvrtc_then(log)
    monkeypatch.setattr(compiler, "_nvrtc", fake)
    monkeypatch.setattr(compiler, "find_nvcc", lambda: "nvcc")
    monkeypatch.setattr(compiler, "_nvcc", lambda req, nvcc: (b"\x7fELF-fake", "k", ""))
    result = compile_kernel(REQ)
    assert calls == [("--expt-relaxed-constexpr",), ()], "the permissive flag was dropped and tried again"
    assert result.ok and result.fallback == kind and result.compiler == f"nvcc ({kind})"
