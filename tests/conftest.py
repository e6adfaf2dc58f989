"""Shared test fixtures. ``gpu``: skip unless CuPy sees a CUDA device."""

from __future__ import annotations

import functools

import pytest


@functools.cache
def gpu_skip_reason() -> str | None:
    """None when a CUDA device is usable through CuPy, else why not."""
    try:
        import cupy

        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # no CuPy, no driver, no device
        return f"no GPU ({type(exc).__name__}: {str(exc).splitlines()[0][:80]})"
    return None if count > 0 else "no GPU (no CUDA device)"


@pytest.fixture
def gpu() -> None:
    reason = gpu_skip_reason()
    if reason:
        pytest.skip(reason)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``gpu`` skip themselves on machines without one."""
    marked = [item for item in items if item.get_closest_marker("gpu")]
    if not marked:
        return
    reason = gpu_skip_reason()
    if reason:
        for item in marked:
            item.add_marker(pytest.mark.skip(reason=reason))
