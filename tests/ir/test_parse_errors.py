"""Input that is not CUDA text fails with a KtxError subclass saying where and what to do."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from ktx.ir import ParseError, parse, parse_file
from ktx.ir.errors import KtxError


def test_binary_file(tmp_path: Path) -> None:
    f = tmp_path / "k.cu"
    f.write_bytes(b"__global__ void k() {}\n\x7fELF\x00\x01")
    with pytest.raises(ParseError) as info:
        parse_file(f)
    assert isinstance(info.value, KtxError)
    assert str(info.value).startswith(f"{f}:2:5: binary file")
    assert info.value.hint


def test_not_utf8(tmp_path: Path) -> None:
    f = tmp_path / "latin1.cu"
    f.write_bytes("// caf\u00e9\n__global__ void k() {}\n".encode("latin-1"))
    with pytest.raises(ParseError) as info:
        parse_file(f)
    assert str(info.value) == f"{f}:1:7: source is not valid UTF-8 (save the file as UTF-8)"


def test_empty_and_blank_files(tmp_path: Path) -> None:
    for content in (b"", b"  \n\t\n"):
        f = tmp_path / "empty.cu"
        f.write_bytes(content)
        with pytest.raises(ParseError, match="empty file") as info:
            parse_file(f)
        assert info.value.location is not None and info.value.location.line == 1


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(ParseError, match="no such file") as info:
        parse_file(tmp_path / "nope.cu")
    assert str(info.value).startswith(str(tmp_path / "nope.cu"))
    with pytest.raises(ParseError, match="is a directory"):
        parse_file(tmp_path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads anything")
def test_unreadable_file(tmp_path: Path) -> None:
    f = tmp_path / "secret.cu"
    f.write_text("__global__ void k() {}")
    f.chmod(0)
    with pytest.raises(ParseError, match="cannot read"):
        parse_file(f)


def test_parse_of_text_and_bytes() -> None:
    with pytest.raises(ParseError):
        parse(b"\xff\xfe")
    with pytest.raises(ParseError):
        parse("bad surrogate \udcff here")
    assert parse("").kernels == () and parse("").print() == ""
    bom = parse(b"\xef\xbb\xbf__global__ void k() {}\n")
    assert bom.kernel().span.start == 3 and bom.diagnostics == ()
