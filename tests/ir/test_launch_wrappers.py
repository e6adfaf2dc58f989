"""Launch helpers: calls that forward grid and block are launches; the others are opaque."""

from __future__ import annotations

from pathlib import Path

from ktx.ir import parse, parse_file
from ktx.ir.language import parse_tree
from ktx.ir.launch import dim3_field_assignments

CORPUS = Path(__file__).resolve().parents[1] / "corpus"


def test_wrapper_sites_carry_the_callers_arguments() -> None:
    m = parse_file(CORPUS / "wrapper_launches.cu")
    sites = [s for s in m.launch_sites if s.wrapper == "launch"]
    first = sites[0]
    assert m.text(first.grid) == "dim3((n + kThreads - 1) / kThreads)"
    assert m.text(first.block) == "dim3(kThreads)"
    assert first.template_args == ("float",) and first.args == ("y", "x", "n") and first.function == "go"
    (nested,) = [s for s in m.launch_sites if s.wrapper == "run_on"]
    assert nested.shared is not None and m.text(nested.shared) == "0"  # the literal inside run_on
    assert m.text(nested.stream) == "s"


def test_a_helper_that_computes_the_block_is_an_opaque_launch() -> None:
    m = parse_file(CORPUS / "wrapper_launches.cu")
    assert [(o.kernel, o.helper, o.span.line) for o in m.opaque_launches] == [("shift", "computed", 49)]


def test_no_wrapper_no_opaque_launch() -> None:
    m = parse("__global__ void k(float* y) { y[0] = 1.f; }\nvoid go(float* y) { k<<<1, 32>>>(y); }\n")
    assert m.opaque_launches == () and [s.wrapper for s in m.launch_sites] == [None]


def test_dim3_fields_assigned_in_branches_are_unknown() -> None:
    src = b"void f(int n) { dim3 b; b.x = 128; if (n) b.y = 2; b.z += 1; }"
    tree = parse_tree(src)
    body = tree.root_node.children[0].child_by_field_name("body")
    assert body is not None
    fields = dim3_field_assignments(src, body, "b", len(src))
    assert {k: src[v.start_byte : v.end_byte] for k, v in fields.items()} == {"x": b"128"}


def _walked_calls(root: object) -> list[tuple[int, int, str]]:
    """The calls in the order of the Python walk the query replaced: a call before the calls
    inside it, later siblings first (an independent spelling of the order ``_calls`` keeps)."""
    from ktx.ir.launch import _last_name

    found: list[tuple[int, int, str]] = []
    stack = [root]
    while stack:
        node = stack.pop()
        stack.extend(node.children)  # type: ignore[attr-defined]
        if node.type == "call_expression":  # type: ignore[attr-defined]
            name = _last_name(node.child_by_field_name("function"))  # type: ignore[attr-defined]
            if name:
                found.append((node.start_byte, node.end_byte, name))  # type: ignore[attr-defined]
    return found


def test_calls_come_from_the_query_in_the_walks_order() -> None:
    from ktx.ir.launch import _calls

    src = (CORPUS / "wrapper_launches.cu").read_bytes() + (
        b"\nvoid h() { outer(inner(a), ns::mid<int>(b))(c); f(g(h2(x))); obj.m(1); (*fp)(2); }\n"
    )
    tree = parse_tree(src)
    got = [(n.start_byte, n.end_byte, name) for n, name in _calls(tree.root_node)]
    assert got == _walked_calls(tree.root_node)
    names = [name for _, _, name in got]
    assert {"outer", "inner", "mid", "f", "g", "h2"} <= set(names) and "m" not in names
    assert names.index("f") < names.index("g") < names.index("h2"), "a call before the calls inside it"
