"""Launch mappings: from the file's launcher (C++ -> expressions), vars, substitution."""

from __future__ import annotations

from pathlib import Path

import pytest
from ktx.ir import parse, parse_file
from ktx.ir.launch import LaunchMapping, mapping_from_file, substitute

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("kernel", "grid", "block", "shared"),
    [
        ("silu_and_mul", ("num_tokens",), ("max(1, min(d // (16 // 2), 256))",), "0"),
        ("rmsnorm", ("num_tokens",), ("32", "max(1, (min(1024, d // (16 // 2)) + 31) // 32)"), None),
        (
            "merge_attn_states",
            ("(num_tokens * num_heads * (head_size // (16 // 2)) + 128 - 1) // 128",),
            ("128",),
            "0",
        ),
        ("moe_sum", ("num_tokens",), ("min(d, 1024)",), "0"),
    ],
)
def test_suite_launchers_translate(
    kernel: str, grid: tuple[str, ...], block: tuple[str, ...], shared: str | None
) -> None:
    module = parse_file(ROOT / "kernels" / kernel / "kernel.cu")
    mapping = mapping_from_file(module, module.kernels[0].name)
    assert mapping is not None
    resolved = mapping.resolved()
    assert resolved.grid == grid and resolved.block == block
    if shared is not None:
        assert resolved.shared == shared


def test_rmsnorm_vars_keep_shared_memory_tied_to_the_warps() -> None:
    module = parse_file(ROOT / "kernels" / "rmsnorm" / "kernel.cu")
    mapping = mapping_from_file(module, "rmsnorm_kernel")
    assert mapping is not None
    assert [n for n, _ in mapping.vars] == ["vec_size", "block_size", "num_warps", "smem_size"]
    assert mapping.evaluate({"num_tokens": 3, "d": 4096}) == ((3,), (32, 16), 64)


def test_untranslatable_launchers_give_none_and_unknown_locals_a_note() -> None:
    src = "__global__ void k(int* x) {}\nvoid l(int* x, int n) { k<<<foo(n), 32>>>(x); }\n"
    assert mapping_from_file(parse(src), "k") is None
    src = (
        "__global__ void k(int* x) {}\n"
        "void l(int* x, int n) { int b = 1; if (n) b = 2; k<<<n, b * 32>>>(x); }\n"
    )
    mapping = mapping_from_file(parse(src), "k")
    assert mapping is not None and mapping.block == ("b * 32",)
    assert "launch names b" in mapping.notes[0]


def test_c_forms() -> None:
    src = """\
__global__ void k(int* x) {}
#define THREADS 128
void l(int* x, int n, int m) {
  const int t = n > 4096 ? 256 : THREADS;
  k<<<ceil_div(n, t), dim3(t, static_cast<int>(m)), (size_t)t * sizeof(float)>>>(x);
}
"""
    mapping = mapping_from_file(parse(src), "k")
    assert mapping is not None
    r = mapping.resolved()
    assert r.grid == ("ceil_div(n, 256 if n > 4096 else 128)",)
    assert r.block == ("256 if n > 4096 else 128", "m")
    assert r.shared == "(256 if n > 4096 else 128) * 4"


def test_substitute_and_json_round_trip() -> None:
    assert substitute("a * B + B", {"B": "x if x else 2"}) == "a * (x if x else 2) + (x if x else 2)"
    m = LaunchMapping(("t", "S"), ("32", "w"), "w * 4", (("w", "max(1, d // 256)"),), "f.cu:3")
    assert LaunchMapping.from_json(m.to_json()) == m
    assert m.names == frozenset({"t", "S", "d"})
