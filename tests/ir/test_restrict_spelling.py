"""``T* __restrict p`` (no trailing underscores) is ``__restrict__`` to nvcc, and to ktx.

tree-sitter reads ``__restrict`` after ``*`` as MSVC's pointer modifier (``ms_pointer_modifier``),
not a type qualifier, so FasterTransformer's ``const T* __restrict in`` parameters were taken as
possibly aliasing; vectorize then refused their per-thread bodies ("cross-element dependence").
"""

from __future__ import annotations

import pytest
from ktx.ir import parse


@pytest.mark.parametrize("spelling", ["__restrict__", "__restrict", "restrict"])
def test_every_spelling_marks_the_parameter_restrict(spelling: str) -> None:
    m = parse(f"__global__ void k(float* {spelling} out, const float* {spelling} in, float* plain) {{}}\n")
    assert [(p.name, p.restrict) for p in m.kernel("k").params] == [
        ("out", True),
        ("in", True),
        ("plain", False),
    ]
