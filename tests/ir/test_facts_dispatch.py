"""The types a dispatch macro binds where a launch sits inside it (``ktx.ir.facts.dispatch``),
and the rank a draft's guess among several instantiations takes (``dtypes.guess_rank``)."""

from __future__ import annotations

from pathlib import Path

from ktx.ir.facts.dispatch import defines, dispatch_branches, local_defines
from ktx.ir.facts.dtypes import guess_rank

HERE = Path(__file__).parent.parent / "init" / "dispatch"


def _at(text: str, needle: str) -> int:
    return text.index(needle)


def test_a_local_macro_binds_one_type_per_case_with_pasting_and_acc_type() -> None:
    path = HERE / "kernel.cu"
    text = path.read_text()
    got = dispatch_branches(text, _at(text, "scale_rows<scalar_t_0"), local_defines(path, text))
    assert got == (
        {"scalar_t_0": "float", "acc_t": "float"},
        {"scalar_t_0": "at::Half", "acc_t": "float"},  # at::acc_type of a 16-bit type is float
    )


def test_outside_a_dispatch_nothing_is_bound() -> None:
    path = HERE / "kernel.cu"
    text = path.read_text()
    assert dispatch_branches(text, _at(text, "out[i] ="), local_defines(path, text)) == ()


def test_torch_dispatch_cases_bind_scalar_t() -> None:
    text = (
        "#define MY_CASES(...) AT_DISPATCH_CASE(at::ScalarType::Float, __VA_ARGS__) \\\n"
        "  AT_DISPATCH_CASE(at::ScalarType::BFloat16, __VA_ARGS__)\n"
        "#define MY_DISPATCH(TYPE, NAME, ...) AT_DISPATCH_SWITCH(TYPE, NAME, MY_CASES(__VA_ARGS__))\n"
        'void f() { MY_DISPATCH(t, "k", [&] { k<scalar_t><<<1, 1>>>(p); }); }\n'
    )
    got = dispatch_branches(text, _at(text, "k<scalar_t>"), defines(text))
    assert got == ({"scalar_t": "float"}, {"scalar_t": "at::BFloat16"})


def test_torch_fixed_dispatch_macros_are_known_without_their_headers() -> None:
    text = 'void f() { AT_DISPATCH_FLOATING_TYPES_AND_HALF(t, "k", [&] { k<scalar_t><<<1, 1>>>(p); }); }\n'
    got = dispatch_branches(text, _at(text, "k<scalar_t>"), {})
    assert got == ({"scalar_t": "double"}, {"scalar_t": "float"}, {"scalar_t": "at::Half"})


def test_a_closed_case_does_not_leak_its_types() -> None:
    text = (
        "#define D(...) { using a_t = double; } { using b_t = float; __VA_ARGS__; }\n"
        "void f() { D(k<b_t><<<1, 1>>>(p)); }\n"
    )
    assert dispatch_branches(text, _at(text, "k<b_t>"), defines(text)) == ({"b_t": "float"},)


def test_guess_rank_puts_fp32_first_and_fp64_last() -> None:
    ranked = sorted(
        [("double", "double"), ("at::Half", "float"), ("float", "float"), ("int", "General8bit")],
        key=guess_rank,
    )
    assert ranked == [("float", "float"), ("int", "General8bit"), ("at::Half", "float"), ("double", "double")]
