"""A project's load macro (``#define LDG(x) __ldg(x)``) reads like the intrinsic it stands for.

:func:`ktx.ir.facts.kinds.access_kind` classifies ``LDG(&p[i])`` as a load of ``p[i]`` when every
definition of ``LDG`` is a load intrinsic of its one parameter (or a plain dereference, the
fallback for old architectures), so vectorize packs it instead of refusing an escaping address.
"""

from __future__ import annotations

import pytest
from ktx.ir import parse
from ktx.ir.facts.kinds import access_kind, intrinsic_of
from ktx.ir.syntax import walk

KERNEL = "__global__ void k(float* y, const float* x) { y[0] = LDG(&x[1]); }\n"


def _kind(defines: str) -> tuple[str, str]:
    m = parse(defines + KERNEL)
    (sub,) = [n for n in walk(m.tree.root_node) if n.type == "subscript_expression" and n.text == b"x[1]"]
    return access_kind(sub), intrinsic_of(sub)


@pytest.mark.parametrize(
    "defines",
    [
        "#define LDG(x) __ldg(x)\n",
        "#if __CUDA_ARCH__ >= 350\n#define LDG(p) __ldg(p)\n#else\n#define LDG(p) (*(p))\n#endif\n",
        "#define LDG(ptr) (__ldcs((ptr)))\n",
    ],
)
def test_a_load_macro_is_a_load(defines: str) -> None:
    kind, via = _kind(defines)
    assert kind == "load" and via.startswith("__ld")


@pytest.mark.parametrize(
    "defines",
    [
        "",  # no definition in the file: an unknown call that takes the address
        "#define LDG(x) (*(x))\n",  # a dereference only: no intrinsic says it is a load
        "#define LDG(x) __ldg(x)\n#define LDG2(x) x\n#undef LDG\n#define LDG(x) keep(x)\n",  # one is not
        "#define LDG(x, y) __ldg(x)\n",  # two parameters
        "#define LDG(x) __stcs(x, 0.f)\n",  # a store
    ],
)
def test_other_macros_keep_the_address(defines: str) -> None:
    assert _kind(defines) == ("address", "")
