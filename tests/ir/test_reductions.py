"""The one reduction recogniser: each form it accepts, and the look-alikes it must refuse."""

from __future__ import annotations

import doctest

import pytest
from ktx.ir import Module, parse
from ktx.ir.facts import reductions as reductions_module
from ktx.ir.facts.reductions import Reduction, reduction_of, reductions, unreorderable, update_in, update_of
from ktx.ir.syntax import text, walk


def _kernel(body: str) -> Module:
    return parse(
        "__global__ void k(const float* x, const float* y, float* o, int* io, int n) {\n" + body + "\n}\n"
    )


def _found(body: str) -> list[tuple[str, tuple[str, ...]]]:
    return [(r.op, r.carried) for r in reductions(_kernel(body), "k")]


@pytest.mark.parametrize(
    ("loop", "op"),
    [
        ("for (int i = 0; i < n; i++) s += x[i];", "sum"),
        ("for (int i = 0; i < n; i++) s -= x[i];", "sum"),
        ("for (int i = 0; i < n; i++) s = s + x[i] * y[i];", "sum"),
        ("for (int i = 0; i < n; i++) s = x[i] + s;", "sum"),
        ("for (int i = 0; i < n; i++) { s = (s + x[i]); }", "sum"),
        ("for (int i = 0; i < n; i++) if (x[i] > 0.f) s++;", "sum"),
        ("for (int i = 0; i < n; i++) s *= x[i];", "product"),
        ("for (int i = 0; i < n; i++) s = fmaxf(s, x[i]);", "max"),
        ("for (int i = 0; i < n; i++) s = max(x[i], s);", "max"),
        ("for (int i = 0; i < n; i++) s = fminf(s, x[i]);", "min"),
        ("for (int i = 0; i < n; i++) if (x[i] > s) s = x[i];", "max"),
        ("for (int i = 0; i < n; i++) { if (s < x[i]) { s = x[i]; } }", "max"),
        ("for (int i = 0; i < n; i++) if (x[i] <= s) s = x[i];", "min"),
        ("int i = 0; while (i < n) { s += x[i]; i++; }", "sum"),
    ],
)
def test_single_variable_forms(loop: str, op: str) -> None:
    assert _found(f"float s = 0.f;\n{loop}\no[0] = s;") == [(op, ("s",))]


def test_max_records_its_function_and_line() -> None:
    m = _kernel("float s = 0.f;\nfor (int i = 0; i < n; i++) s = fmaxf(s, x[i]);")
    (r,) = reductions(m, "k")
    assert (r.call, r.line, r.name) == ("fmaxf", 3, "s")
    assert r.updates[0].form == "=" and text(m, r.updates[0].operand or r.loop) == "x[i]"
    assert r.loop.type == "for_statement" and r.scope.start == r.loop.start_byte


def test_argmax_is_one_reduction_over_value_and_index() -> None:
    body = (
        "float best = -1e30f; int idx = 0;\n"
        "for (int i = 0; i < n; i++) { float v = x[i]; if (v > best) { best = v; idx = i; } }\n"
        "io[0] = idx;"
    )
    (r,) = reductions(_kernel(body), "k")
    assert (r.op, r.carried) == ("argmax", ("best", "idx"))
    assert {u.statement.type for u in r.updates} == {"if_statement"}


def test_argmin() -> None:
    body = "float lo = 1e30f; int at = 0;\nfor (int i = 0; i < n; i++) if (x[i] < lo) { lo = x[i]; at = i; }"
    assert _found(body) == [("argmin", ("lo", "at"))]


def test_welford() -> None:
    body = (
        "float mean = 0.f, m2 = 0.f; int count = 0;\n"
        "for (int i = 0; i < n; i++) {\n"
        "  count += 1;\n"
        "  float delta = x[i] - mean;\n"
        "  mean += delta / count;\n"
        "  m2 += delta * (x[i] - mean);\n"
        "}\n"
        "o[0] = m2 / count;"
    )
    (r,) = reductions(_kernel(body), "k")
    assert (r.op, r.carried) == ("welford", ("mean", "m2", "count"))
    assert [u.name for u in r.updates] == ["count", "mean", "m2"]


def test_dependent_pair_max_then_sum_of_exp() -> None:
    body = (
        "float mx = -1e30f, s = 0.f;\n"
        "for (int i = 0; i < n; i++) mx = fmaxf(mx, x[i]);\n"
        "for (int i = 0; i < n; i++) { float e = expf(x[i] - mx); s += e; }\n"
        "o[0] = s;"
    )
    first, second = reductions(_kernel(body), "k")
    assert (first.op, second.op) == ("max", "sum")
    assert first.depends_on is None
    assert second.depends_on == first
    assert "after max mx" in second.describe()


def test_independent_loops_do_not_depend() -> None:
    body = (
        "float a = 0.f, b = 0.f;\n"
        "for (int i = 0; i < n; i++) a += x[i];\n"
        "for (int i = 0; i < n; i++) b += y[i];"
    )
    assert [r.depends_on for r in reductions(_kernel(body), "k")] == [None, None]


@pytest.mark.parametrize(
    ("loop", "why"),
    [
        ("for (int i = 0; i < n; i++) { s += x[i]; o[i] = s; }", "running value read outside its update"),
        ("for (int i = 0; i < n; i++) { if (x[i] > s) s = x[i]; o[i] = s; }", "extremum read elsewhere"),
        ("for (int i = 0; i < n; i++) s += s * x[i];", "the folded value reads s"),
        ("for (int i = 0; i < n; i++) s = s * 0.5f + x[i];", "a recurrence, not a fold"),
        ("for (int i = 0; i < n; i++) s = fmaxf(x[i], y[i]);", "no s in the max"),
        ("for (int i = 0; i < n; i++) s = x[i];", "a plain overwrite"),
        ("for (int i = 0; i < n; i++) s /= x[i];", "division does not reorder"),
        ("for (int i = 0; i < n; i++) s = x[i] - s;", "s - e is a sum; e - s alternates"),
        ("for (int i = 0; i < n; i++) if (x[i] > s) s = x[i]; else s = 0.f;", "an else branch"),
        ("for (int i = 0; i < n; i++) if (x[i] > s) s = s + x[i];", "the guarded value reads s"),
        ("for (int i = 0; i < n; i++) if (y[i] > s) s = x[i];", "compares one value, keeps another"),
        ("for (int i = 0; i < n; i++) { s += x[i]; s = fmaxf(s, y[i]); }", "two operators"),
        ("for (int i = 0; i < n; i++) o[i] = (s += x[i]);", "the update's value is used"),
    ],
)
def test_refused(loop: str, why: str) -> None:
    assert _found(f"float s = 0.f;\n{loop}") == [], why


def test_coupled_online_softmax_is_refused() -> None:
    body = (
        "float m = -1e30f, d = 0.f;\n"
        "for (int i = 0; i < n; i++) {\n"
        "  float prev = m;\n"
        "  m = fmaxf(m, x[i]);\n"
        "  d = d * expf(prev - m) + expf(x[i] - m);\n"
        "}"
    )
    assert _found(body) == []


def test_coupled_through_a_condition_is_refused() -> None:
    body = (
        "float m = -1e30f, s = 0.f;\n"
        "for (int i = 0; i < n; i++) { if (x[i] > m) s += 1.f; m = fmaxf(m, x[i]); }"
    )
    assert _found(body) == []


def test_counter_and_locals_are_not_reductions() -> None:
    body = "float s = 0.f;\nfor (int i = 0; i < n; i += 2) { float t = 0.f; t += x[i]; s += t; }"
    assert _found(body) == [("sum", ("s",))]


def test_nested_loops_carry_over_both() -> None:
    m = _kernel(
        "float s = 0.f;\nfor (int r = 0; r < n; r++) {\n  for (int c = 0; c < n; c++) s += x[r * n]; }"
    )
    outer, inner = reductions(m, "k")
    assert outer.loop.start_point[0] + 1 == 3 and inner.loop.start_point[0] + 1 == 4
    assert reductions(m, "k", inner.loop) == (inner,)
    inner_body = inner.loop.child_by_field_name("body")
    assert inner_body is not None
    assert reductions(m, "k", inner_body) == (inner,)  # a loop's body stands for the loop
    assert reduction_of(m, "k", inner.loop, "s") == inner
    assert reduction_of(m, "k", inner.loop, "t") is None


def test_cached_per_module() -> None:
    m = _kernel("float s = 0.f;\nfor (int i = 0; i < n; i++) s += x[i];")
    assert reductions(m, "k") is reductions(m, "k")
    assert isinstance(reductions(m, "k")[0], Reduction)


def test_unknown_function_names_the_ones_there() -> None:
    with pytest.raises(KeyError, match="its functions: k"):
        reductions(_kernel(""), "nope")


def _assignment(m: Module) -> list[object]:
    return [n for n in walk(m.tree.root_node) if n.type == "assignment_expression"]


def test_update_of_an_lvalue_for_tree_reductions() -> None:
    m = parse(
        "__global__ void k() { __shared__ float a[64]; int t = threadIdx.x, s = 1;\n"
        "a[t] = fmaxf(a[t], a[t + s]); a[t] += a[t + s]; a[t] -= a[t + s]; a[t] = a[t] + a[t]; }"
    )
    ws = [n for n in walk(m.tree.root_node) if n.type == "assignment_expression"]
    got = [(u.op, u.call, u.negated) if (u := update_of(m, w)) else None for w in ws]
    assert got == [("max", "fmaxf", False), ("sum", "", False), ("sum", "", True), None]


def test_docstring_examples() -> None:
    result = doctest.testmod(reductions_module)
    assert result.attempted > 0 and result.failed == 0


def test_update_in_a_braced_statement() -> None:
    m = parse(
        "__global__ void k() { __shared__ float a[64]; int t = threadIdx.x, s = 1;\n"
        "if (t < s) { a[t] += a[t + s]; }\nif (t < s) { a[t] += 1.f; a[t] += 2.f; }\n}"
    )
    ifs = [n for n in walk(m.tree.root_node) if n.type == "if_statement"]
    first, second = (n.child_by_field_name("consequence") for n in ifs)
    assert first is not None and second is not None
    found = update_in(m, first)
    assert found is not None and found.operand is not None
    assert (found.name, found.op, text(m, found.operand)) == ("a[t]", "sum", "a[t + s]")
    assert update_in(m, second) is None


def _carried(body: str, sequential: bool) -> tuple[str, str, int] | None:
    m = _kernel("float s = 0.f; int k = 0;\nfor (int i = 0; i < n; i++) " + body)
    loop = next(n for n in walk(m.tree.root_node) if n.type == "for_statement")
    body_node = loop.child_by_field_name("body")
    assert body_node is not None
    found = unreorderable(m, body_node, {"i"}, sequential)
    return None if found is None else (found.name, found.problem, found.line)


@pytest.mark.parametrize("sequential", [False, True])
def test_unreorderable_accepts_order_free_updates(sequential: bool) -> None:
    for body in ("s += x[i];", "s = s - x[i];", "s = std::max(s, x[i]);", "if (x[i] > s) s = x[i];", "++s;"):
        assert _carried(body, sequential) is None, body


def test_unreorderable_names_the_variable_the_problem_and_the_line() -> None:
    assert _carried("s = s * 0.5f + x[i];", False) == ("s", "not-a-reduction", 3)
    assert _carried("s += s * x[i];", True) == ("s", "not-a-reduction", 3)
    assert _carried("{ s += x[i];\n o[i] = s; }", False) == ("s", "read-outside", 4)
    assert _carried("{ s += x[i];\n o[i] = s; }", True) is None  # one thread's loop keeps its order
    assert _carried("o[i] = (s += x[i]);", False) == ("s", "not-a-reduction", 3)


def test_unreorderable_keeps_argmax_to_sequential_loops() -> None:
    argmax = "{ float v = x[i]; if (v > s) { s = v; k = i; } }"
    assert _carried(argmax, True) is None
    assert _carried(argmax, False) == ("s", "not-a-reduction", 3)  # ties would pick another index


def _trees(loop: str) -> list[tuple[tuple[str, ...], str | None]]:
    m = parse(
        "__global__ void k(float* o) {\n  __shared__ float buf[256];\n  __shared__ float other[256];\n"
        "  int t = threadIdx.x;\n" + loop + "\n}\n"
    )
    facts = m.facts()
    assert all(facts.loop_at(tr.loop) is not None for tr in facts.tree_reductions)
    return [(tr.arrays, tr.var) for tr in facts.tree_reductions]


@pytest.mark.parametrize(
    ("loop", "expect"),
    [
        # the textbook halving tree, each spelling of the halving step
        (
            "for (int s = blockDim.x / 2; s > 0; s >>= 1) { "
            "if (t < s) buf[t] += buf[t + s]; __syncthreads(); }",
            [(("buf",), "s")],
        ),
        (
            "for (int s = 128; s > 0; s = s / 2) { "
            "if (t < s) buf[t] = buf[t] + buf[t + s]; __syncthreads(); }",
            [(("buf",), "s")],
        ),
        (
            "for (int s = 128; s > 0; s /= 2) { "
            "__syncthreads(); if (t < s) buf[t] = fmaxf(buf[t], buf[t + s]); }",
            [(("buf",), "s")],
        ),
        # interleaved addressing: a tree, but its stride grows
        (
            "for (int s = 1; s < 256; s *= 2) { "
            "if (t % (2 * s) == 0) buf[t] += buf[t + s]; __syncthreads(); }",
            [(("buf",), None)],
        ),
        # look-alikes: no barrier, a copy between arrays, a store of a value that reads no element
        ("for (int s = 128; s > 0; s >>= 1) { if (t < s) buf[t] += buf[t + s]; }", []),
        ("for (int s = 128; s > 0; s >>= 1) { other[t] = buf[t + s]; __syncthreads(); }", []),
        ("for (int s = 128; s > 0; s >>= 1) { buf[t] = o[t] * 2.f; __syncthreads(); }", []),
    ],
)
def test_shared_memory_tree_reductions(loop: str, expect: list[tuple[tuple[str, ...], str | None]]) -> None:
    assert _trees(loop) == expect
