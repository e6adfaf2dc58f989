"""``[[buffers]]`` and struct pointer fields: a by-value struct that holds its buffers as
pointers (causal-conv1d's ``ConvParamsBase``: ``x_ptr``, ``out_ptr``, ``conv_state_ptr``), each
field naming a buffer the spec declares; the harness writes the buffer's device address at the
compiler's offset, and the buffers are drawn, guarded and compared like arguments."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from ktx.ir.errors import KtxError
from ktx.ir.facts.structs import StructLayout, kernel_layouts

from ktx.measure.argpack import struct_layouts
from ktx.measure.compile import find_nvcc
from ktx.measure.gpu import _args
from ktx.measure.guards import run_guarded
from ktx.measure.verify import seeded_inputs
from ktx.spec import Spec
from ktx.specload import load_spec

#: The pattern of ConvParamsBase: sizes and strides, a bool, then pointers among them.
STRUCT = """\
#include <stdint.h>
struct Params {
    int batch, dim;
    bool silu;
    uint32_t x_stride;
    void *__restrict__ x_ptr;
    void *__restrict__ out_ptr;
    int32_t *__restrict__ idx_ptr;
    float scale;
    void *state_ptr;
};
"""
KERNEL = STRUCT + "__global__ void k(Params p) {}\n"

SPEC = """\
kernel = "k"

[[args]]
name = "p"
type = "Params"
fields.batch = "b"
fields.dim = "d"
fields.silu = true
fields.x_stride = "d"
fields.x_ptr = "x"
fields.out_ptr = "out"
fields.idx_ptr = "0"
fields.scale = "0.5"
fields.state_ptr = "{state}"

[[buffers]]
name = "x"
dtype = "fp32"
shape = "[b, d]"

[[buffers]]
name = "out"
dtype = "bf16"
shape = "[b, d]"
role = "out"
{extra}
[shapes]
default = [{{ b = 2, d = 8 }}]

[launch]
grid = ["b"]
block = ["d"]
"""


def spec_at(tmp_path: Path, state: str = "0", extra: str = "", kernel: str = KERNEL) -> Spec:
    (tmp_path / "kernel.cu").write_text(kernel)
    (tmp_path / "ktx.toml").write_text(SPEC.format(state=state, extra=extra))
    return load_spec(tmp_path)


def layout_or_skip(spec: Spec) -> StructLayout:
    if not kernel_layouts(KERNEL, "k"):
        pytest.skip("libclang is not available")
    return struct_layouts(spec)["p"]


def test_pointer_fields_name_buffers_and_the_rest_stay_fields(tmp_path: Path) -> None:
    spec = spec_at(tmp_path)
    layout_or_skip(spec)
    (p,) = spec.args
    assert p.pointers == (("x_ptr", "x"), ("out_ptr", "out"))
    assert "idx_ptr" in dict(p.fields) and "x_ptr" not in dict(p.fields)
    assert [a.name for a in spec.all_args] == ["p", "x", "out"]
    assert [a.name for a in spec.buffers] == ["x", "out"]
    # bytes moved: x read (2*8 fp32) + out written (2*8 bf16)
    assert spec.bytes_moved(spec.env(spec.shape_set().points[0])) == 2 * 8 * 4 + 2 * 8 * 2


def test_buffers_are_drawn_and_poisoned_like_arguments(tmp_path: Path) -> None:
    spec = spec_at(tmp_path)
    point = spec.shape_set().points[0]
    arrays = seeded_inputs(spec, point, seed=1)
    assert set(arrays) == {"x", "out"}
    assert arrays["x"].shape == (2, 8) and arrays["x"].dtype == np.float32
    assert arrays["out"].dtype == np.uint16  # bf16 storage, poisoned


def test_the_launch_packs_each_buffers_address_at_the_compilers_offset(tmp_path: Path) -> None:
    spec = spec_at(tmp_path)
    layout = layout_or_skip(spec)
    point = spec.shape_set().points[0]
    arrays = seeded_inputs(spec, point, seed=1)
    (packed,) = _args(spec, spec.env(point), arrays)
    raw = np.frombuffer(packed.tobytes(), dtype=np.uint8)
    assert raw.size == layout.size

    def at(name: str, dtype: str) -> int | float:
        leaf = layout.leaf(name)
        assert leaf is not None
        return np.frombuffer(raw[leaf.offset : leaf.offset + leaf.size].tobytes(), dtype=dtype)[0].item()

    assert at("x_ptr", "<u8") == arrays["x"].ctypes.data
    assert at("out_ptr", "<u8") == arrays["out"].ctypes.data
    assert at("idx_ptr", "<u8") == 0 and at("state_ptr", "<u8") == 0
    assert at("dim", "<i4") == 8 and at("x_stride", "<u4") == 8 and at("scale", "<f4") == 0.5


def test_the_guarded_launch_hands_the_buffers_to_the_kernel_and_returns_outputs(tmp_path: Path) -> None:
    """The worker's guard path on numpy: the "kernel" writes through the address the struct
    holds (as the device kernel does through ``p.out_ptr``), into the guarded copy."""
    spec = spec_at(tmp_path)
    layout = layout_or_skip(spec)
    point = spec.shape_set().points[0]
    env = spec.env(point)
    pristine = seeded_inputs(spec, point, seed=1)
    leaf = layout.leaf("out_ptr")
    assert leaf is not None

    def launch(arrays: dict[str, np.ndarray]) -> None:
        (packed,) = _args(spec, env, arrays)
        address = int(np.frombuffer(packed.tobytes()[leaf.offset : leaf.offset + 8], dtype="<u8")[0])
        out = arrays["out"]
        assert address == out.ctypes.data  # the guarded copy's, not pristine's
        out[...] = 0x3F80  # bf16 1.0

    outputs = run_guarded(spec, point, pristine, launch, np, original=True)
    assert set(outputs) == {"out"} and (outputs["out"] == 0x3F80).all()


def test_a_pointer_field_takes_a_buffer_or_zero(tmp_path: Path) -> None:
    spec = spec_at(tmp_path, state="7")
    layout_or_skip(spec)
    point = spec.shape_set().points[0]
    with pytest.raises(KtxError, match="a pointer field takes a buffer's name or 0"):
        _args(spec, spec.env(point), seeded_inputs(spec, point, seed=1))


def test_a_buffer_name_on_a_number_field_is_refused(tmp_path: Path) -> None:
    with pytest.raises(KtxError, match=r"field dim \(int\) is no pointer, yet names buffer 'x'"):
        spec = spec_at(tmp_path)
        text = (tmp_path / "ktx.toml").read_text().replace('fields.dim = "d"', 'fields.dim = "x"')
        (tmp_path / "ktx.toml").write_text(text)
        spec = load_spec(tmp_path)
        layout_or_skip(spec)


def test_a_buffer_needs_a_shape_and_a_unique_name(tmp_path: Path) -> None:
    with pytest.raises(KtxError, match="buffer 'y' needs a 'shape'"):
        spec_at(tmp_path, extra='\n[[buffers]]\nname = "y"\ndtype = "fp32"\n')
    with pytest.raises(KtxError, match="duplicate argument 'x'"):
        spec_at(tmp_path, extra='\n[[buffers]]\nname = "x"\ndtype = "fp32"\nshape = "[b]"\n')


def _offsets_from_nvcc(tmp_path: Path, struct: str, type_name: str, names: list[str]) -> list[int]:
    """sizeof and offsetof of each field as nvcc's host compiler lays the struct out."""
    nvcc = find_nvcc()
    assert nvcc is not None
    prints = "".join(f'  printf("%zu\\n", offsetof({type_name}, {n}));\n' for n in names)
    main = f"#include <cstdio>\n#include <cstddef>\n#include <cstdint>\n{struct}\nint main() {{\n{prints}"
    main += f'  printf("%zu\\n", sizeof({type_name}));\n}}\n'
    src = tmp_path / "layout.cu"
    src.write_text(main)
    exe = tmp_path / "layout"
    subprocess.run([nvcc, "-std=c++17", str(src), "-o", str(exe)], check=True, capture_output=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    return [int(line) for line in out.split()]


@pytest.mark.slow
@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not installed")
def test_libclangs_layout_with_pointers_is_the_compilers(tmp_path: Path) -> None:
    (found,) = kernel_layouts(KERNEL, "k") or pytest.skip("libclang is not available")
    assert found.layout is not None
    names = [leaf.name for leaf in found.layout.leaves]
    *offsets, size = _offsets_from_nvcc(tmp_path, STRUCT, "Params", names)
    assert offsets == [leaf.offset for leaf in found.layout.leaves]
    assert size == found.layout.size


CONV = Path(__file__).resolve().parents[1] / "benchmarks/realcode/src/causal-conv1d/csrc/causal_conv1d.h"


@pytest.mark.slow
@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not installed")
@pytest.mark.skipif(not CONV.is_file(), reason="benchmarks/realcode/src not fetched (fetch.py)")
def test_conv_params_base_layout_is_the_compilers(tmp_path: Path) -> None:
    """The real-code case: causal-conv1d's ConvParamsBase (its sizes and strides, and 10 pointers)."""
    struct = "#include <stdint.h>\n" + CONV.read_text().replace("#pragma once", "")
    (found,) = kernel_layouts(struct + "__global__ void k(ConvParamsBase p) {}\n", "k") or pytest.skip(
        "libclang is not available"
    )
    assert found.layout is not None
    leaves = found.layout.leaves
    assert sum(leaf.kind == "pointer" for leaf in leaves) == 10
    *offsets, size = _offsets_from_nvcc(tmp_path, struct, "ConvParamsBase", [leaf.name for leaf in leaves])
    assert offsets == [leaf.offset for leaf in leaves]
    assert size == found.layout.size


def test_buffers_and_pointer_fields_are_part_of_the_measurement_key(tmp_path: Path) -> None:
    from ktx.search.tunable import spec_digest

    base = spec_digest(spec_at(tmp_path))
    assert (
        spec_digest(spec_at(tmp_path, extra='\n[[buffers]]\nname = "y"\ndtype = "fp32"\nshape = "[b]"\n'))
        != base
    )
    assert spec_digest(spec_at(tmp_path, state="x")) != base  # state_ptr now points at x


def test_a_plain_struct_is_laid_out_when_the_instantiation_does_not_parse(tmp_path: Path) -> None:
    """causal-conv1d's ``Ktraits`` names ``at::BFloat16``, from a torch header libclang is not
    given: the instantiation does not parse, but ``ConvParamsBase`` depends on no template
    parameter, so the declaration's layout is the one every instantiation has."""
    kernel = STRUCT + "template <typename Traits, bool kFlag>\n__global__ void k(Params p) {}\n"
    if not kernel_layouts(KERNEL, "k"):
        pytest.skip("libclang is not available")
    assert not kernel_layouts(kernel, "k", template_args=["Traits<at::BFloat16>", "false"])
    (tmp_path / "kernel.cu").write_text(kernel)
    text = SPEC.format(state="0", extra="").replace(
        'kernel = "k"', 'kernel = "k"\ntemplate_args = ["Traits<at::BFloat16>", "false"]'
    )
    (tmp_path / "ktx.toml").write_text(text)
    layout = struct_layouts(load_spec(tmp_path))["p"]
    leaf = layout.leaf("x_ptr")
    assert leaf is not None and leaf.kind == "pointer" and leaf.size == 8
