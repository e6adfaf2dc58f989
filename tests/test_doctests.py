"""The runnable examples in the docstrings of the pass framework."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "ktx.template",
    "ktx.usercode",
    "ktx.ir.launch",
    "ktx.pipeline",
    "ktx.passbase",
    "ktx.passes._common",
    "ktx.ir.affine",
    "ktx.ir.affine_form",
    "ktx.ir.access",
    "ktx.ir.memref",
    "ktx.ir.facts",
    "ktx.ir.facts.kinds",
    "ktx.ir.facts.owners",
    "ktx.ir.facts.structs",
    "ktx.measure.argpack",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name))
    assert result.failed == 0
