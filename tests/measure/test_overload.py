"""Two ``__global__`` kernels of one name (lmdeploy's ``ActivationKernel``): the spec's
arguments pick the one measured, for the nvcc stub, the struct layouts and the checks."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from ktx.ir.module import parse

from ktx.measure.overload import is_overloaded, overload_address, overload_params

OVERLOADED = r"""
template <class T> struct Silu { __device__ T operator()(T x) const { return x; } };
namespace ns {
template <int V, class Act, class T>
__global__ void act(T* gate, const T* __restrict__ up, Act op, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) gate[i] = op(gate[i]) * up[i];
}
template <int V, class Act, class T>
__global__ void act(T* gate_up, const T* bias, int n, Act op) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) gate_up[i] = op(gate_up[i]) + bias[i];
}
}
"""

FIRST = ("gate", "up", "op", "n")
SECOND = ("gate_up", "bias", "n", "op")


def test_the_spec_arguments_pick_the_overload() -> None:
    name = "ns::act<4, Silu<float>, float>"
    assert is_overloaded(OVERLOADED, "ns::act")
    assert overload_address(OVERLOADED, name, FIRST) == (
        "static_cast<void (*)(float*, const float*, Silu<float>, int)>(&ns::act<4, Silu<float>, float>)"
    )
    assert overload_address(OVERLOADED, name, SECOND) == (
        "static_cast<void (*)(float*, const float*, int, Silu<float>)>(&ns::act<4, Silu<float>, float>)"
    )
    assert overload_address(OVERLOADED, name, ("x", "y")) is None  # none fits: nvcc says why
    one = OVERLOADED[: OVERLOADED.index("template <int V", OVERLOADED.index("}\n") + 1)] + "}\n"
    assert not is_overloaded(one, "ns::act") and overload_params(one, "ns::act", FIRST) == ()
    assert overload_params(OVERLOADED, "ns::act", FIRST) == FIRST


def test_spec_kernel_is_the_overload_its_args_name() -> None:
    from types import SimpleNamespace

    from ktx.spec import spec_kernel

    module = parse(OVERLOADED, "k.cu")
    for names in (FIRST, SECOND):
        spec = SimpleNamespace(kernel="act", args=[SimpleNamespace(name=n) for n in names])
        picked = spec_kernel(module.kernels, spec)  # type: ignore[arg-type]
        assert tuple(p.name for p in picked.params) == names


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc")
def test_nvcc_builds_the_overload_the_spec_names(tmp_path: Path) -> None:
    from ktx.measure.compile import CompileRequest, compile_kernel

    name = "ns::act<4, Silu<float>, float>"

    def build(params: tuple[str, ...]) -> tuple[bool, str]:
        req = CompileRequest(OVERLOADED, name, ("-std=c++17",), "90", (), "nvcc", param_names=params)
        res = compile_kernel(req)
        return res.ok, res.lowered_name if res.ok else res.log

    ok, log = build(())
    assert not ok and "overloaded function" in log  # the plain address is ambiguous
    ok, first = build(FIRST)
    assert ok and first.startswith("_ZN2ns3act")
    ok, second = build(SECOND)
    assert ok and second != first


def test_struct_layouts_read_the_overload_the_spec_names(tmp_path: Path) -> None:
    from ktx.ir.facts.structs import kernel_layouts

    from ktx.measure.argpack import struct_layouts
    from ktx.specload import load_spec

    if not kernel_layouts("struct P { int n; };\n__global__ void k(P p) {}\n", "k"):
        pytest.skip("libclang is not available")
    (tmp_path / "kernel.cu").write_text(OVERLOADED)
    second = (
        'kernel = "ns::act"\ntemplate_args = ["4", "Silu<float>", "float"]\n'
        '[[args]]\nname = "gate_up"\ndtype = "fp32"\nshape = "[n]"\nrole = "inout"\n'
        '[[args]]\nname = "bias"\ndtype = "fp32"\nshape = "[n]"\n'
        '[[args]]\nname = "n"\ndtype = "int32"\nvalue = "n"\n'
        '[[args]]\nname = "op"\nfields = {}\n'
        '[shapes]\ndefault = [{ n = 1024 }]\n[launch]\ngrid = ["n // 256"]\nblock = ["256"]\n'
    )
    (tmp_path / "ktx.toml").write_text(second)
    spec = load_spec(tmp_path / "ktx.toml")
    layout = struct_layouts(spec)["op"]
    assert layout.size == 1 and not layout.leaves
