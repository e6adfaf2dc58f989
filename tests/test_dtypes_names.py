"""Issue 22: the element types a project's headers define are ktx dtypes."""

from __future__ import annotations

import pytest

from ktx.dtypes import ctype_dtype, lookup


@pytest.mark.parametrize(
    ("written", "name"),
    [
        ("c10::BFloat16", "bf16"), ("at::BFloat16", "bf16"), ("__nv_bfloat16", "bf16"),
        ("nv_bfloat16", "bf16"), ("c10::Half", "fp16"), ("at::Half", "fp16"), ("half", "fp16"),
        ("__half", "fp16"), ("float16_t", "fp16"),
        ("cutlass::half_t", "fp16"), ("c10::Float8_e4m3fn", "fp8_e4m3"), ("__nv_fp8_e4m3", "fp8_e4m3"),
        ("c10::Float8_e5m2", "fp8_e5m2"), ("int32_t", "int32"), ("int64_t", "int64"), ("bf16", "bf16"),
        ("bfloat16", "bf16"), ("float", "fp32"),
    ],
)  # fmt: skip
def test_spellings_name_dtypes(written: str, name: str) -> None:
    found = lookup(written)
    assert found is not None and found.name == name


def test_qualifiers_and_prefixes_do_not_matter_and_fnuz_is_not_e4m3() -> None:
    assert ctype_dtype("const ::c10::BFloat16 *") == "bf16"
    assert ctype_dtype("std::int64_t") == "int64"
    assert ctype_dtype("const float* __restrict__") == "fp32"
    assert lookup("c10::Float8_e4m3fnuz") is None  # bias 8: another encoding
    assert lookup("bf17") is None
