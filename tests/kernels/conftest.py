"""Fixtures for the kernel-suite tests."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator

import pytest

from ._suite import SuiteBuild, build_suite, nvcc_path


@pytest.fixture(scope="session")
def suite_build() -> Iterator[SuiteBuild]:
    """nvcc results for every kernels/*/kernel.cu, compiled once per session, in parallel."""
    if nvcc_path() is None:
        pytest.skip("nvcc is not on PATH: the kernel compile tests need the CUDA toolkit")
    with tempfile.TemporaryDirectory(prefix="ktx-kernels-") as tmp:
        yield build_suite(tmp)
