"""One copy of the tree helpers (node text, walking, declarations, barriers), in ``ktx.ir.syntax``."""

from __future__ import annotations

import ast
from pathlib import Path

import tree_sitter as ts
from ktx.ir import parse
from ktx.ir import syntax as ir_syntax
from ktx.ir.access import _text as access_text
from ktx.ir.access import _walk as access_walk
from ktx.ir.consteval import _text as consteval_text
from ktx.ir.index import text as index_text

ROOT = Path(__file__).resolve().parents[2]

SRC = b"""#define KTX_INLINE inline __attribute__((always_inline)) __device__
KTX_INLINE float twice(float x) { return 2.0f * x; }
__global__ void k(float* y) { y[threadIdx.x] = twice(y[threadIdx.x]); }
"""


def test_one_copy() -> None:
    assert not (ROOT / "ktx" / "syntax.py").exists()  # merged here (issue 21): no second copy above ir
    assert access_text is ir_syntax.text and access_walk is ir_syntax.walk
    assert consteval_text is ir_syntax.node_text and index_text is ir_syntax.node_text
    for path in ("ir/access.py", "ir/consteval.py", "ir/index.py", "passes/vectorize.py"):
        tree = ast.parse((ROOT / path).read_text())
        defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert not defined & {"text", "_text", "walk", "_walk", "node_text"}, path


def test_ir_syntax_imports_no_ktx_module_at_run_time() -> None:
    """The bottom of ktx.ir: every IR module may use it (its Module, Function, Span are types only)."""
    tree = ast.parse((ROOT / "ir" / "syntax.py").read_text())
    body = [n for n in tree.body if not (isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")]
    imported = {n.module for stmt in body for n in ast.walk(stmt) if isinstance(n, ast.ImportFrom)}
    imported |= {
        a.name for stmt in body for n in ast.walk(stmt) if isinstance(n, ast.Import) for a in n.names
    }
    assert "tree_sitter" in imported
    assert not any(m and m.startswith("ktx") for m in imported), imported


def test_original_text_and_parsed_text() -> None:
    module = parse(SRC)
    root = module.tree.root_node
    uses = [n for n in ir_syntax.walk(root) if n.start_byte <= SRC.index(b"KTX_INLINE float") < n.end_byte]
    node = uses[-1]  # the innermost node around the macro's use (its bytes are masked)
    original = ir_syntax.text(module, node)
    parsed = ir_syntax.node_text(node)
    assert "KTX_INLINE float twice" in original  # the bytes the module keeps
    assert len(parsed) == len(original) and "KTX_INLINE float" not in parsed  # what the parser saw
    assert ir_syntax.node_text(None) == ""
    names = [ir_syntax.node_text(n) for n in ir_syntax.walk(root) if n.type == "identifier"]
    assert names[:4] == ["KTX_INLINE", "twice", "x", "x"]  # the #define line is not masked


def test_exclusive_branches_of_one_if_chain() -> None:
    src = """\
__global__ void k(float* o, int n) {
#if A > 1
  o[0] = 1.f;
#if B
  o[1] = 2.f;
#else
  o[2] = 3.f;
#endif
#elif A == 1
  o[3] = 4.f;
#else
  o[4] = 5.f;
#endif
  o[5] = 6.f;
}
"""
    m = parse(src, "k.cu")
    subs = {
        ir_syntax.text(m, n): n for n in ir_syntax.walk(m.tree.root_node) if n.type == "subscript_expression"
    }
    o = [subs[f"o[{i}]"] for i in range(6)]
    assert (
        ir_syntax.exclusive(o[0], o[3])
        and ir_syntax.exclusive(o[3], o[4])
        and ir_syntax.exclusive(o[0], o[4])
    )
    assert ir_syntax.exclusive(o[1], o[2]) and ir_syntax.exclusive(o[2], o[3])
    assert not ir_syntax.exclusive(o[0], o[1]) and not ir_syntax.exclusive(o[0], o[2])
    assert not any(ir_syntax.exclusive(o[5], x) for x in o[:5])


def _preorder(node: ts.Node) -> list[tuple[int, int, str]]:
    """Source order by recursion over ``children`` (what the cursor walk must give)."""
    out = [(node.start_byte, node.end_byte, node.type)]
    for child in node.children:
        out.extend(_preorder(child))
    return out


def test_walk_visits_every_node_in_source_order_and_stays_under_its_start() -> None:
    from ktx.ir.language import parse_tree
    from ktx.ir.syntax import walk

    src = b"__global__ void k(float* x, int n) { for (int i = 0; i < n; ++i) { if (i) x[i] = f(i); } }\n"
    src += b"void g() { k<<<1, 32>>>(0, 4); }\n"
    root = parse_tree(src).root_node
    assert [(n.start_byte, n.end_byte, n.type) for n in walk(root)] == _preorder(root)
    loop = next(n for n in walk(root) if n.type == "for_statement")
    inside = [(n.start_byte, n.end_byte, n.type) for n in walk(loop)]
    assert inside == _preorder(loop) and inside[0][2] == "for_statement"
    assert all(loop.start_byte <= a and b <= loop.end_byte for a, b, _ in inside), "left its subtree"
    leaf = next(n for n in walk(root) if n.type == "number_literal")
    assert [n.type for n in walk(leaf)] == ["number_literal"]
