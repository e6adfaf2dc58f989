"""A project's read-only load helper (``ldg(const T* p) { return __ldg(p); }``) reads like ``__ldg``.

FasterTransformer defines ``ldg`` in a header (``utils/cuda_type_utils.cuh``) that its kernels
include by a path from the repository root; without the body, ``ldg(&bias[i])`` must be taken as
an address that escapes. :mod:`ktx.ir.load_helpers` reads the body in the file or a header its
quoted includes reach (beside the file or in a folder above it).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ktx.ir import parse
from ktx.ir.facts.kinds import access_kind, intrinsic_of
from ktx.ir.load_helpers import helpers_in
from ktx.ir.syntax import walk

KERNEL = (
    '#include "utils/type_utils.cuh"\n__global__ void k(float* y, const float* x) { y[0] = ldg(&x[1]); }\n'
)

HELPER = "template <typename T>\ninline __device__ T ldg(const T* val) {\n    return __ldg(val);\n}\n"
BF16 = (
    "template <>\ninline __device__ __nv_bfloat16 ldg(const __nv_bfloat16* val) {\n"
    "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800\n    return val[0];\n#else\n"
    "    return __ldg(val);\n#endif\n}\n"
)


def _kind(source: str, path: Path | None) -> tuple[str, str]:
    m = parse(source, str(path) if path is not None else None)
    (sub,) = [n for n in walk(m.tree.root_node) if n.type == "subscript_expression" and n.text == b"x[1]"]
    return access_kind(sub), intrinsic_of(sub)


def _project(tmp_path: Path, header: str) -> Path:
    """``root/utils/type_utils.cuh`` and ``root/src/kernels/k.cu`` (the include names the root's path)."""
    (tmp_path / "utils").mkdir()
    (tmp_path / "utils" / "type_utils.cuh").write_text(header)
    cu = tmp_path / "src" / "kernels" / "k.cu"
    cu.parent.mkdir(parents=True)
    cu.write_text(KERNEL)
    return cu


@pytest.mark.parametrize("header", [HELPER, HELPER + BF16])
def test_a_helper_in_an_included_header_is_a_load(tmp_path: Path, header: str) -> None:
    cu = _project(tmp_path, header)
    assert _kind(KERNEL, cu) == ("load", "__ldg")


def test_a_helper_in_the_file_itself_is_a_load() -> None:
    assert _kind(HELPER + KERNEL, None) == ("load", "__ldg")


@pytest.mark.parametrize(
    "header",
    [
        "",  # no definition reached: an unknown call that takes the address
        HELPER.replace("return __ldg(val);", "return *val;"),  # a dereference only: nothing says read-only
        # an overload that writes
        HELPER
        + "inline __device__ float ldg(float* val) {\n  *val = 0.f;\n  return 1.f;\n}\n",
        HELPER.replace("return __ldg(val);", "keep(val);\n    return __ldg(val);"),  # more than the load
        HELPER.replace("__ldg", "__stcs"),  # not a load
    ],
)
def test_other_helpers_keep_the_address(tmp_path: Path, header: str) -> None:
    cu = _project(tmp_path, header)
    assert _kind(KERNEL, cu) == ("address", "")


def test_a_header_the_file_does_not_include_is_not_read(tmp_path: Path) -> None:
    cu = _project(tmp_path, HELPER)
    source = KERNEL.split("\n", 1)[1]
    cu.write_text(source)
    assert _kind(source, cu) == ("address", "")


def test_helpers_in_reads_every_definition_of_a_name() -> None:
    good, bad = helpers_in(HELPER + BF16 + "__device__ float other(float* p) { return p[1]; }\n")
    assert "ldg" in good and "ldg" not in bad
    assert "other" in bad
