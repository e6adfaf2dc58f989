"""ktx.ir: a light IR over tree-sitter-cuda, with byte spans and safe edits.

>>> from ktx.ir import parse
>>> m = parse("template <int N> __global__ void k(float* x) { for (int i = 0; i < N; ++i) x[i] = 1; }")
>>> k = m.kernel()
>>> (k.name, [p.name for p in k.template_params], m.loops[0].var)
('k', ['N'], 'i')
"""

from ktx.ir.clang import ClangFacts, KernelFacts, ParamFacts
from ktx.ir.clang import facts as clang_facts
from ktx.ir.edits import Applied, Edit, EditError, EditSet, apply, splice
from ktx.ir.module import Module, ParseError, parse, parse_file
from ktx.ir.nodes import (
    Constant,
    Diagnostic,
    Function,
    Kernel,
    LaunchBounds,
    LaunchSite,
    Loop,
    Macro,
    Param,
    Pragma,
    SharedArray,
    TemplateParam,
)
from ktx.ir.source import LineIndex, Span

__all__ = [
    "Applied",
    "ClangFacts",
    "Constant",
    "Diagnostic",
    "Edit",
    "EditError",
    "EditSet",
    "Function",
    "Kernel",
    "KernelFacts",
    "LaunchBounds",
    "LaunchSite",
    "LineIndex",
    "Loop",
    "Macro",
    "Module",
    "Param",
    "ParamFacts",
    "ParseError",
    "Pragma",
    "SharedArray",
    "Span",
    "TemplateParam",
    "apply",
    "clang_facts",
    "parse",
    "parse_file",
    "splice",
]
