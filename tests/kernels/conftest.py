"""Fixtures for the kernel-suite tests."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator

import pytest

from ._suite import SuiteBuild, build_suite, nvcc_path


@pytest.fixture(scope="session")
def suite_build(pytestconfig: pytest.Config) -> Iterator[SuiteBuild]:
    """nvcc results for every kernels/*/kernel.cu, compiled once per session, in parallel, and
    kept in pytest's cache folder (``.pytest_cache``) keyed by toolchain, flags and source, so a
    rerun compiles only what changed; ``-p no:cacheprovider`` (or ``--cache-clear``) compiles all."""
    if nvcc_path() is None:
        pytest.skip("nvcc is not on PATH: the kernel compile tests need the CUDA toolkit")
    provider = getattr(pytestconfig, "cache", None)  # absent under -p no:cacheprovider
    cache = provider.mkdir("ktx-suite-nvcc") if provider is not None else None
    with tempfile.TemporaryDirectory(prefix="ktx-kernels-") as tmp:
        yield build_suite(tmp, cache)
