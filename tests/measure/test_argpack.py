"""``argpack.pack``: a struct argument's bytes are the bytes nvcc's own build gives the same struct
with the same field values (padding zero), and a value a field cannot hold is refused."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from ktx.ir.errors import KtxError
from ktx.ir.expr import Expr
from ktx.ir.facts.structs import Leaf, StructLayout, kernel_layouts, path_name

from ktx.measure.argpack import pack, struct_dtype
from ktx.spec import STRUCT, Arg

STRUCTS = r"""
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
struct Inner { char tag; double value; };
struct Params { int ncols; float scale; Inner in; short coef[3]; uint3 div; float4 f4; int2 i2;
                bool flag; __nv_bfloat16 b; __half h; unsigned long long big; signed char s; };
__global__ void k(Params p, uint3 q, float4 r, dim3 g) {}
"""


def value_of(leaf: Leaf, i: int) -> str:
    """A distinct value per leaf that its type holds exactly (negative for signed ints)."""
    if leaf.kind == "int":
        return str(-(i + 1) * 3)
    if leaf.kind == "uint":
        return str((i + 1) * 5 + (1 << 40 if leaf.size == 8 else 0))
    if leaf.kind == "bool":
        return "1"
    return str((i + 1) * 0.25 + 0.5)  # exact in float, double, half and bf16


def c_value(leaf: Leaf, text: str) -> str:
    if leaf.kind == "bf16":
        return f"__float2bfloat16({text}f)"
    if leaf.kind == "fp16":
        return f"__float2half({text}f)"
    if leaf.kind == "uint" and leaf.size == 8:
        return f"{text}ull"
    return text


def struct_arg(name: str, layout: StructLayout) -> Arg:
    fields = tuple((leaf.name, Expr.parse(value_of(leaf, i))) for i, leaf in enumerate(layout.leaves))
    return Arg(name, STRUCT, "scalar", fields=fields)


@pytest.fixture(scope="module")
def layouts() -> dict[str, StructLayout]:
    found = kernel_layouts(STRUCTS, "k")
    if not found:
        pytest.skip("libclang is not available")
    return {p.name: p.layout for p in found if p.layout is not None}


@pytest.mark.slow
def test_packed_bytes_match_nvcc(layouts: dict[str, StructLayout], tmp_path: Path) -> None:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("no nvcc")
    assert set(layouts) == {"p", "q", "r", "g"}
    lines = ["#include <cstdio>", "#include <cstring>", STRUCTS, "int main() {"]
    for name, layout in layouts.items():
        lines.append(f"  {{ {layout.type} v; std::memset((void*)&v, 0, sizeof v);")
        for i, leaf in enumerate(layout.leaves):
            lines.append(f"    v.{path_name(leaf.path)} = {c_value(leaf, value_of(leaf, i))};")
        lines.append(f'    std::printf("{name} ");')
        lines.append(
            '    for (size_t i = 0; i < sizeof v; ++i) std::printf("%02x", ((unsigned char*)&v)[i]);'
        )
        lines.append('    std::printf("\\n"); }')
    lines.append("  return 0;\n}")
    src = tmp_path / "bytes.cu"
    src.write_text("\n".join(lines))
    exe = tmp_path / "bytes"
    build = subprocess.run([nvcc, "-std=c++17", "-o", str(exe), str(src)], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    want = dict(line.split() for line in out.splitlines())
    for name, layout in layouts.items():
        packed = pack(struct_arg(name, layout), layout, {})
        assert isinstance(packed, np.void) and packed.dtype.itemsize == layout.size
        assert packed.tobytes().hex() == want[name], name
    assert len(want["p"]) == 2 * layouts["p"].size


def layout_of(*leaves: Leaf) -> StructLayout:
    size = max(leaf.offset + leaf.size for leaf in leaves)
    return StructLayout("T", size + (-size) % 8, 8, leaves)


def test_dtype_has_the_compilers_offsets_and_size() -> None:
    layout = layout_of(Leaf(("c",), 0, 1, "int", "char"), Leaf(("d",), 8, 8, "float", "double"))
    dt = struct_dtype(layout)
    assert dt.itemsize == 16
    assert dt.fields is not None and dt.fields["d"][1] == 8 and dt.fields["c"][0] == np.dtype("i1")


def test_integer_field_refuses_fractions_and_overflow() -> None:
    layout = layout_of(Leaf(("n",), 0, 2, "int", "short"), Leaf(("u",), 4, 4, "uint", "unsigned int"))

    def packed(n: str, u: str) -> bytes:
        return pack(
            Arg("a", STRUCT, "scalar", fields=(("n", Expr.parse(n)), ("u", Expr.parse(u)))), layout, {}
        ).tobytes()

    assert packed("-2", "7.0") == bytes.fromhex("feff000007000000")
    with pytest.raises(KtxError, match=r"0\.5 is not an integer"):
        packed("0.5", "1")
    with pytest.raises(KtxError, match="40000 does not fit in 2 byte"):
        packed("40000", "1")
    with pytest.raises(KtxError, match="-1 does not fit in 4 byte"):
        packed("1", "-1")


def test_worker_launch_arguments_carry_the_packed_struct(tmp_path: Path) -> None:
    """``ktx.measure.gpu._args``, the one place every launch (timed, graph, sanitizer) gets its
    arguments from: arrays, then the struct as a structured scalar, then the int scalar."""
    from ktx.measure import gpu
    from ktx.specload import load_spec

    (tmp_path / "kernel.cu").write_text(
        "struct P { char c; double s; };\n__global__ void k(float* y, P p, uint3 q, int n) { y[0] = 0.f; }\n"
    )
    (tmp_path / "ktx.toml").write_text(
        'kernel = "k"\n[[args]]\nname = "y"\ndtype = "fp32"\nshape = "[n]"\nrole = "out"\n'
        '[[args]]\nname = "p"\nfields = { c = 5, s = "n / 4" }\n'
        '[[args]]\nname = "q"\nfields = { x = "n", y = 1, z = "n * 2" }\n'
        '[[args]]\nname = "n"\ndtype = "int32"\nvalue = "n"\n'
        '[shapes]\ndefault = [{ n = 6 }]\n[launch]\ngrid = ["1"]\nblock = ["32"]\n'
    )
    spec = load_spec(tmp_path)
    env = spec.env(spec.shape_set().points[0])
    y = np.zeros(6, dtype=np.float32)
    out = gpu._args(spec, env, {"y": y})
    assert out[0] is y and isinstance(out[3], np.int32) and int(out[3]) == 6
    assert (
        isinstance(out[1], np.void) and out[1].tobytes() == bytes([5]) + bytes(7) + np.float64(1.5).tobytes()
    )
    assert out[2].tobytes() == np.array([6, 1, 12], dtype="<u4").tobytes()
