"""The cubin cache key: it must change with the toolchain's version and the included headers."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ktx.measure import compile as compiler
from ktx.measure.compile import CompileRequest, CompileResult, headers_digest, toolchain_id


def fake_nvcc(root: Path, version: str) -> Path:
    """A CUDA_PATH with a ``bin/nvcc`` that only answers ``--version``."""
    nvcc = root / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True, exist_ok=True)
    nvcc.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {version}'\n")
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IXUSR)
    return nvcc


@pytest.fixture
def fresh_versions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compiler, "_NVCC_VERSIONS", {})
    monkeypatch.delenv("CUDA_HOME", raising=False)


def request(folder: Path, backend: str = "nvcc") -> CompileRequest:
    return CompileRequest("__global__ void k() {}", "k", ("-O3",), "90", (str(folder),), backend)


@pytest.mark.skipif(os.name != "posix", reason="a shell-script nvcc")
def test_nvcc_version_changes_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_versions: None
) -> None:
    root = tmp_path / "cuda"
    fake_nvcc(root, "12.4, V12.4.131")
    monkeypatch.setenv("CUDA_PATH", str(root))
    before_id, before_key = toolchain_id("nvcc"), request(tmp_path).key
    assert before_id.startswith("nvcc-") and str(root) not in before_id  # the version, not the path
    # Same path, another toolkit installed over it (a new process sees the new --version).
    fake_nvcc(root, "13.0, V13.0.88")
    compiler._NVCC_VERSIONS.clear()
    assert toolchain_id("nvcc") != before_id
    assert request(tmp_path).key != before_key


@pytest.mark.skipif(os.name != "posix", reason="a shell-script nvcc")
def test_nvcc_version_is_asked_once_per_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_versions: None
) -> None:
    nvcc = fake_nvcc(tmp_path / "cuda", "12.4")
    monkeypatch.setenv("CUDA_PATH", str(tmp_path / "cuda"))
    first = toolchain_id("nvcc")
    nvcc.write_text("#!/bin/sh\nexit 1\n")
    assert toolchain_id("nvcc") == first


def test_backend_selects_the_versions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compiler, "nvrtc_version", lambda: "nvrtc12.9")
    monkeypatch.setattr(compiler, "find_nvcc", lambda: None)
    assert toolchain_id("nvrtc") == "nvrtc12.9"
    assert toolchain_id("nvcc") == "nonvcc"
    assert toolchain_id("auto") == "nvrtc12.9:nonvcc"
    first = request(Path("."), "auto").key
    monkeypatch.setattr(compiler, "nvrtc_version", lambda: "nvrtc13.0")
    assert request(Path("."), "auto").key != first
    assert compiler._toolchain_id is toolchain_id  # ktx.search.evaluate looks it up by this name


def test_changed_header_changes_the_key(tmp_path: Path) -> None:
    (tmp_path / "kernel.cu").write_text('#include "tile.cuh"\n')
    (tmp_path / "tile.cuh").write_text("#define TILE 64\n")
    (tmp_path / "notes.txt").write_text("a")
    key = request(tmp_path).key
    assert request(tmp_path).key == key
    (tmp_path / "notes.txt").write_text("b")  # not a header
    (tmp_path / "kernel.cu").write_text("// the source goes into the key through the request\n")
    assert request(tmp_path).key == key
    (tmp_path / "tile.cuh").write_text("#define TILE 128\n")
    assert request(tmp_path).key != key
    key = request(tmp_path).key
    for name in ("extra.h", "extra.hpp"):
        (tmp_path / name).write_text("int x;\n")
        assert request(tmp_path).key != key
        key = request(tmp_path).key
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "deep.h").write_text("int y;\n")  # not recursive
    assert request(tmp_path).key == key


def test_headers_digest_ignores_missing_folders(tmp_path: Path) -> None:
    assert headers_digest([str(tmp_path / "absent")]) == headers_digest([])


def test_result_round_trips_dropped_flags() -> None:
    done = CompileResult(
        True, "k", "/x.cubin", "_Z1kv", "nvrtc (dropped --expt-relaxed-constexpr)",
        dropped_flags=("--expt-relaxed-constexpr",),
    )  # fmt: skip
    data = done.to_dict()
    data["dropped_flags"] = list(data["dropped_flags"])  # as JSON gives it back
    data["written_by_a_newer_ktx"] = 1
    assert CompileResult.from_dict(data) == done
    legacy = {k: v for k, v in done.to_dict().items() if k not in ("dropped_flags", "fallback")}
    assert CompileResult.from_dict(legacy).dropped_flags == ()


def test_headers_are_read_again_only_when_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The key is asked several times a measurement; reading a project's headers each time cost
    16 ms a key. A header is read again only when its size, time or inode changed."""
    header = tmp_path / "tile.cuh"
    header.write_text("#define TILE 64\n")
    reads: list[Path] = []
    real = Path.read_bytes

    def counted(self: Path) -> bytes:
        reads.append(self)
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", counted)
    first = headers_digest([str(tmp_path)])
    assert headers_digest([str(tmp_path)]) == first
    assert reads.count(header) <= 1
    header.write_text("#define TILE 32\n")  # the same size: the time tells
    stamp = header.stat().st_mtime_ns
    os.utime(header, ns=(stamp + 10_000_000, stamp + 10_000_000))
    assert headers_digest([str(tmp_path)]) != first
