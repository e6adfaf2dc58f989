"""The element type a kernel reads a ``void*``/``char*`` buffer as (``dtypes.cast_element``):
one cast type, not byte types, not integer packing views, none where casts disagree."""

from __future__ import annotations

from ktx.ir.facts.dtypes import cast_element


def test_a_void_buffer_read_as_one_type() -> None:
    body = "{ const float* row = (const float*)((const char*) x + r * nb01); y[i] = row[i]; }"
    assert cast_element(body, "x") == "float"
    assert cast_element("{ auto v = reinterpret_cast<const __half*>(x + o)[i]; }", "x") == "__half"
    assert cast_element("{ const half2* x2 = (const half2*) x; }", "x") == "half2"


def test_no_cast_several_casts_or_packing_views_give_none() -> None:
    assert cast_element("{ y[i] = x[i]; }", "x") is None
    two = "{ if (f) a = ((const half*) x)[i]; else a = ((const float*) x)[i]; }"
    assert cast_element(two, "x") is None  # a flag picks the type: the draft cannot tell
    assert cast_element("{ ((int2*) out)[i] = v; }", "out") is None  # 8 bytes at once, a view
    assert cast_element("{ const float* p = (const float*) xs; }", "x") is None  # another name
