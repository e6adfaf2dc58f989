"""Template arguments at a launch: written, deduced from the arguments' declared types, defaulted."""

from __future__ import annotations

import pytest
from ktx.ir import parse
from ktx.ir.launch import deduce_template_args, expression_type

KERNEL = """\
template <typename T, int VEC = 4>
__global__ void k(T* __restrict__ out, const T* __restrict__ in, int n) { out[0] = in[0]; }
"""


def _deduced(launcher: str) -> tuple[str, ...] | None:
    m = parse(KERNEL + launcher)
    (site,) = m.launch_sites
    return deduce_template_args(m, site)


@pytest.mark.parametrize(
    ("launcher", "expected"),
    [
        ("void go(float* o, const float* i, int n) { k<<<1, 32>>>(o, i, n); }", ("float", "4")),
        ("void go(half* o, const half* i, int n) { k<half, 8><<<1, 32>>>(o, i, n); }", ("half", "8")),
        ("void go(void* o, void* i, int n) { k<<<1, 32>>>((__nv_bfloat16*)o, (const __nv_bfloat16*)i, n); }",
         ("__nv_bfloat16", "4")),
        ("void go(void* o, void* i, int n) { k<<<1, 32>>>(reinterpret_cast<half*>(o), "
         "reinterpret_cast<const half*>(i), n); }", ("half", "4")),
        ("void go(at::Tensor o, at::Tensor i, int n) { k<<<1, 32>>>(o.data_ptr<float>(), "
         "i.data_ptr<float>(), n); }", ("float", "4")),
        ("void go(int n) { double *a, *o = nullptr; const double* i = o; k<<<1, 32>>>(o + 4, &i[2], n); }",
         ("double", "4")),
    ],
    ids=["params", "written", "c-cast", "reinterpret", "data_ptr", "locals"],
)
def test_deduced_like_the_compiler(launcher: str, expected: tuple[str, ...]) -> None:
    assert _deduced(launcher) == expected


def test_unknown_or_conflicting_types_give_none() -> None:
    assert _deduced("void go(int n) { auto o = get(); k<<<1, 32>>>(o, o, n); }") is None
    assert _deduced("void go(float* o, const half* i, int n) { k<<<1, 32>>>(o, i, n); }") is None


def test_expression_type_reads_pointer_depth() -> None:
    m = parse(KERNEL + "void go(float** pp, int n) { k<float><<<1, 32>>>(pp[0], pp[1], n); }")
    (site,) = m.launch_sites
    assert expression_type(m, site, "pp") == ("float", 2)
    assert expression_type(m, site, "pp[0]") is None
