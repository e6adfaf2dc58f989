"""vectorize where a loop's one store is made in both branches of an if/else (ViT's
``add_bias_concat_clstoken_add_posembed``: the class-token row or the input row decides the
value, not whether element ``id`` is written). The lanes fill the pack in either branch and it
is stored once; a store in one branch only, or under a further condition, keeps its condition
and the pointer stays scalar. ``test_vectorize_host.py::concat`` runs every width on the host.
"""

from __future__ import annotations

from passtest import apply, remarks
from test_vectorize_host import CONCAT


def test_a_store_in_both_branches_is_packed_once() -> None:
    t = apply(CONCAT, "vectorize")
    assert [(k.name, k.values) for k in t.knobs] == [("VEC_L0", (1, 2, 4))]
    code = t.instantiate({"VEC_L0": 4})
    assert "ktx::pack<float, 4> ktx_out;" in code
    assert code.count("ktx_out.v[ktx_j] = ") == 2
    assert code.count("ktx::store(out + ktx_p * 4, ktx_out);") == 1


def test_a_store_in_one_branch_only_is_refused() -> None:
    src = CONCAT.replace("    } else {\n      out[id] = in[id - n] * 2.f;\n", "")
    assert "else" not in src
    t = apply(src, "vectorize")
    assert not t.knobs
    assert any("under a condition" in r for r in remarks(t))


def test_a_store_under_a_further_condition_is_refused() -> None:
    src = CONCAT.replace("      out[id] = in[id - n] * 2.f;", "      if (n > 1) out[id] = in[id - n] * 2.f;")
    t = apply(src, "vectorize")
    assert not t.knobs


def test_stores_at_different_indices_are_refused() -> None:
    src = CONCAT.replace("      out[id] = in[id - n] * 2.f;", "      out[id + 1] = in[id - n] * 2.f;")
    t = apply(src, "vectorize")
    assert not t.knobs
