"""NVRTC rejecting a flag that only lets more code compile is no reason to pay for nvcc.

NVRTC 13 rejects ``--expt-relaxed-constexpr``, which 8 of ktx's own kernels carry; with nvcc
installed each of their compiles went to nvcc. These tests stand NVRTC and nvcc in for the real
compilers: what is checked is which one the driver asks, with which flags.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from ktx.measure import compile as compiler
from ktx.measure.compile import CompileRequest, compile_kernel

RELAXED = "--expt-relaxed-constexpr"


def _request(flags: Sequence[str]) -> CompileRequest:
    return CompileRequest("__global__ void k(float* x) { x[0] = 1.f; }", "k", tuple(flags), "90")


def _nvrtc_rejecting(*unknown: str) -> tuple[list[tuple[str, ...]], object]:
    calls: list[tuple[str, ...]] = []

    def nvrtc(req: CompileRequest, flags: Sequence[str]) -> tuple[bytes, str, str]:
        calls.append(tuple(flags))
        bad = [f for f in flags if f in unknown]
        if bad:
            raise compiler._NvrtcFailure(
                f"NVRTC_ERROR_INVALID_OPTION (5)\nnvrtc: error: unrecognized option {bad[0]} found", True
            )
        return b"cubin", "_Z1kPf", ""

    return calls, nvrtc


def test_a_rejected_permissive_flag_is_dropped_before_nvcc(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KTX_CACHE_DIR", str(tmp_path))
    calls, nvrtc = _nvrtc_rejecting(RELAXED)
    monkeypatch.setattr(compiler, "_nvrtc", nvrtc)
    monkeypatch.setattr(compiler, "find_nvcc", lambda: "/usr/bin/nvcc-stand-in")
    monkeypatch.setattr(compiler, "_nvcc", lambda req, nvcc: pytest.fail("nvcc was asked"))
    result = compile_kernel(_request(["-std=c++17", RELAXED, "-I/x"]))
    assert result.ok, result.log
    assert calls == [("-std=c++17", RELAXED, "-I/x"), ("-std=c++17", "-I/x")]
    assert result.compiler == f"nvrtc (dropped {RELAXED})"
    assert result.dropped_flags == (RELAXED,) and not result.fallback


def test_another_rejected_flag_still_goes_to_nvcc(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``-O3`` may change the code: once NVRTC rejects it too (its log names one option at a
    time), nvcc compiles with every flag, as before."""
    monkeypatch.setenv("KTX_CACHE_DIR", str(tmp_path))
    calls, nvrtc = _nvrtc_rejecting(RELAXED, "-O3")
    monkeypatch.setattr(compiler, "_nvrtc", nvrtc)
    monkeypatch.setattr(compiler, "find_nvcc", lambda: "/usr/bin/nvcc-stand-in")
    monkeypatch.setattr(compiler, "_nvcc", lambda req, nvcc: (b"cubin", "_Z1kPf", ""))
    result = compile_kernel(_request([RELAXED, "-O3"]))
    assert result.ok and result.compiler == "nvcc (NVRTC rejected an option)"
    assert calls == [(RELAXED, "-O3"), ("-O3",)]


def test_code_that_needs_the_flag_still_builds_with_nvcc(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Without the flag NVRTC fails to compile (a host constexpr called on the device): nvcc,
    with the flag, builds it, and both NVRTC logs are kept."""
    monkeypatch.setenv("KTX_CACHE_DIR", str(tmp_path))
    calls: list[tuple[str, ...]] = []

    def nvrtc(req: CompileRequest, flags: Sequence[str]) -> tuple[bytes, str, str]:
        calls.append(tuple(flags))
        if RELAXED in flags:
            raise compiler._NvrtcFailure(f"unrecognized option {RELAXED} found", True)
        raise compiler._NvrtcFailure("error: calling a constexpr __host__ function", False)

    monkeypatch.setattr(compiler, "_nvrtc", nvrtc)
    monkeypatch.setattr(compiler, "find_nvcc", lambda: "/usr/bin/nvcc-stand-in")
    monkeypatch.setattr(compiler, "_nvcc", lambda req, nvcc: (b"cubin", "_Z1kPf", ""))
    result = compile_kernel(_request([RELAXED]))
    assert result.ok and result.compiler == "nvcc (NVRTC failed)"  # the retry's failure names it
    assert len(calls) == 2
