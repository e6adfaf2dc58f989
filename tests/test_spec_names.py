"""Issue 22's spec side: a kernel inside namespaces (``kernel = "ns::kernel"``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ktx.ir.errors import KtxError

from ktx.measure.types import original_candidate
from ktx.specload import load_spec

SOURCE = """\
#include <cstdint>
namespace vllm { namespace detail {
template <typename T, int32_t N>
__global__ void k(T* out) { out[threadIdx.x] = T(N); }
} }
"""

SPEC = """\
kernel = "{kernel}"
template_args = ["float", "int32_t(4)"]

[[args]]
name = "out"
dtype = "fp32"
shape = "[n]"
role = "out"

[shapes]
default = [{{n = 32}}]

[launch]
grid = ["1"]
block = ["n"]
"""


def write(tmp_path: Path, kernel: str) -> Path:
    (tmp_path / "kernel.cu").write_text(SOURCE)
    (tmp_path / "ktx.toml").write_text(SPEC.format(kernel=kernel))
    return tmp_path


def test_a_namespaced_kernel_keeps_its_bare_name_and_its_scope(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, "vllm::detail::k"))
    assert (spec.kernel, spec.scope) == ("k", "vllm::detail")
    assert spec.qualified_kernel == "vllm::detail::k"
    assert spec.name_expression == "vllm::detail::k<float, int32_t(4)>"
    assert original_candidate(spec).name_expression == "vllm::detail::k<float, int32_t(4)>"


def test_a_leading_global_scope_and_spaces_are_accepted(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, ":: vllm :: detail::k"))
    assert (spec.kernel, spec.scope) == ("k", "vllm::detail")


def test_a_bare_kernel_has_no_scope(tmp_path: Path) -> None:
    write(tmp_path, "k")
    (tmp_path / "kernel.cu").write_text(SOURCE + "using namespace vllm::detail;\n")
    spec = load_spec(tmp_path)
    assert (spec.kernel, spec.scope, spec.name_expression) == ("k", "", "k<float, int32_t(4)>")


@pytest.mark.parametrize("bad", ["vllm::", "vllm:k", "k<float>", "1k", "vllm::detail::"])
def test_a_name_that_is_not_a_qualified_identifier_is_refused(tmp_path: Path, bad: str) -> None:
    with pytest.raises(KtxError, match="is not a C\\+\\+ identifier") as err:
        load_spec(write(tmp_path, bad))
    assert err.value.location is not None and err.value.location.line == 1


def test_an_unknown_kernel_in_a_namespace_is_still_refused(tmp_path: Path) -> None:
    with pytest.raises(KtxError, match="defines no kernel 'q'"):
        load_spec(write(tmp_path, "vllm::q"))


def test_the_pipeline_qualifies_candidates(tmp_path: Path) -> None:
    from ktx.pipeline import candidate

    spec = load_spec(write(tmp_path, "vllm::detail::k"))
    cand = candidate(spec, "", {})
    assert cand.name_expression == "vllm::detail::k<float, int32_t(4)>"


def test_a_kernel_named_outside_its_namespace_is_refused_with_the_right_name(tmp_path: Path) -> None:
    with pytest.raises(KtxError, match="has no kernel 'k' \\(it has vllm::detail::k\\)") as err:
        load_spec(write(tmp_path, "k"))
    assert err.value.hint == 'write kernel = "vllm::detail::k"'
    with pytest.raises(KtxError, match="has no kernel 'vllm::k'"):
        load_spec(write(tmp_path, "vllm::k"))


def test_a_using_directive_or_a_pre_included_file_lets_the_bare_name_through(tmp_path: Path) -> None:
    write(tmp_path, "k")
    source = tmp_path / "kernel.cu"
    source.write_text(SOURCE + "using namespace vllm::detail;\n")
    assert load_spec(tmp_path).name_expression == "k<float, int32_t(4)>"
    source.write_text(SOURCE)
    spec = tmp_path / "ktx.toml"
    spec.write_text(spec.read_text() + '[compile]\nflags = ["-include", "using_vllm.h"]\n')
    assert load_spec(tmp_path).kernel == "k"
