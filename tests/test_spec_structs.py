"""``[[args]] fields = {...}``: by-value struct and vector arguments in the spec, parsed and
checked against the layout libclang reads from the kernel, each mistake a located KtxError."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from ktx.ir.errors import KtxError
from ktx.ir.facts.structs import kernel_layouts

from ktx.spec import STRUCT
from ktx.specload import load_spec

KERNEL = r"""
#include <cuda_runtime.h>
struct Div { unsigned int mul; unsigned int shift; };
struct Params { int ncols; float scale; Div div; short coef[2]; bool flag; };
__global__ void k(const float* x, float* y, Params p, uint3 q, int n) { y[0] = x[0]; }
"""

HEAD = """kernel = "k"
[[args]]
name = "x"
dtype = "fp32"
shape = "[n]"
[[args]]
name = "y"
dtype = "fp32"
shape = "[n]"
role = "out"
"""

STRUCT_ARGS = """[[args]]
name = "p"
type = "Params"
fields.ncols = "n"
fields.scale = "1.0 / n"
fields.div = { mul = 3, shift = "n // 4" }
fields.coef = ["1", -2]
fields.flag = true
[[args]]
name = "q"
fields = { x = "n", y = "2 * n", z = 7 }
"""

TAIL = """[[args]]
name = "n"
dtype = "int32"
value = "n"
[shapes]
default = [{ n = 8 }]
[launch]
grid = ["1"]
block = ["32"]
"""

#: A kernel over a Params from elsewhere; it writes y (an out the kernel never writes is refused).
SIGNATURE = "__global__ void k(const float* x, float* y, Params p, int n) { y[0] = x[0]; }\n"

pytestmark = pytest.mark.skipif(not kernel_layouts(KERNEL, "k"), reason="libclang is not available")


def write(tmp_path: Path, args: str = STRUCT_ARGS, kernel: str = KERNEL) -> Path:
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "kernel.cu").write_text(kernel)
    (tmp_path / "ktx.toml").write_text(HEAD + args + TAIL)
    return tmp_path


def test_struct_args_parse_to_flat_fields(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path))
    p, q = spec.args[2], spec.args[3]
    assert p.is_struct and q.is_struct and not spec.args[4].is_struct
    assert p.dtype is STRUCT and p.role == "scalar" and not p.is_array and p.value is None
    assert p.ctype == "Params" and q.ctype is None
    env = spec.env(spec.shape_set().points[0])
    assert [(n, e.evaluate(env)) for n, e in p.fields] == [
        ("ncols", 8),
        ("scale", 0.125),
        ("div.mul", 3),
        ("div.shift", 2),
        ("coef[0]", 1),
        ("coef[1]", -2),
        ("flag", 1),
    ]
    assert [n for n, _ in q.fields] == ["x", "y", "z"]
    # Each field's expression is located at its own line (for errors at evaluation).
    where = dict(p.fields)["div.shift"].where
    assert where is not None and where.line == 16


def error(tmp_path: Path, args: str, kernel: str = KERNEL) -> KtxError:
    with pytest.raises(KtxError) as info:
        load_spec(write(tmp_path, args, kernel))
    return info.value


def test_unknown_field_names_the_known_ones(tmp_path: Path) -> None:
    exc = error(tmp_path, STRUCT_ARGS.replace("fields.ncols", "fields.ncol"))
    assert "has no field ncol" in exc.message and "ncols" in exc.hint
    assert exc.location is not None and exc.location.line == 14


def test_missing_field_is_refused(tmp_path: Path) -> None:
    exc = error(tmp_path, STRUCT_ARGS.replace(", z = 7", ""))
    assert "no value for field(s) z of uint3" in exc.message


def test_wrong_type_name_is_refused(tmp_path: Path) -> None:
    exc = error(tmp_path, STRUCT_ARGS.replace('type = "Params"', 'type = "Parms"'))
    assert "Parms" in exc.message and "Params" in exc.message


def test_fields_on_a_plain_parameter_are_refused(tmp_path: Path) -> None:
    kernel = KERNEL.replace("uint3 q", "int q")
    exc = error(tmp_path, STRUCT_ARGS, kernel)
    assert "parameter q is int, not a struct" in exc.message


def test_fields_exclude_dtype_and_value(tmp_path: Path) -> None:
    exc = error(tmp_path, STRUCT_ARGS.replace('type = "Params"', 'dtype = "int32"'))
    assert "takes no 'dtype'" in exc.message
    exc = error(tmp_path, STRUCT_ARGS.replace("fields = { x", "value = 1\nfields = { x"))
    assert "takes no 'value'" in exc.message


def test_bad_field_values(tmp_path: Path) -> None:
    assert "empty array" in error(tmp_path, STRUCT_ARGS.replace('["1", -2]', "[]")).message
    assert "expected a table" in error(tmp_path, STRUCT_ARGS.replace("fields = { x", "fields = 3\n#")).message
    exc = error(tmp_path, STRUCT_ARGS.replace('"2 * n"', '"2 * m"'))
    assert "args.q.fields.y: unknown name 'm'" in exc.message


def test_field_values_are_part_of_the_measurement_key(tmp_path: Path) -> None:
    from ktx.search.tunable import spec_context

    a = spec_context(load_spec(write(tmp_path / "a")))
    b = spec_context(load_spec(write(tmp_path / "b", STRUCT_ARGS.replace("z = 7", "z = 8"))))
    assert a != b
    assert a["args"][0] == b["args"][0] and "fields" not in a["args"][0]  # plain args keep their key


def test_torch_export_refuses_struct_args_plainly(tmp_path: Path) -> None:
    from ktx.torch_export import cuda_source

    with pytest.raises(KtxError, match="struct passed by value"):
        cuda_source(load_spec(write(tmp_path)), [])


def test_struct_from_a_header_on_the_specs_include_flags(tmp_path: Path) -> None:
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "params.h").write_text(
        "#pragma once\nstruct Params { int ncols;\n#ifdef BIG\n  double extra;\n#endif\n};\n"
    )
    kernel = '#include "params.h"\n' + SIGNATURE
    args = '[[args]]\nname = "p"\nfields = { ncols = "n", extra = 2 }\n'
    write(tmp_path, args, kernel)
    toml = tmp_path / "ktx.toml"
    toml.write_text(toml.read_text() + '[compile]\nflags = ["-Iinc", "-DBIG"]\n')
    spec = load_spec(tmp_path)
    assert [n for n, _ in spec.args[2].fields] == ["ncols", "extra"]
    toml.write_text(toml.read_text().replace(', "-DBIG"', ""))
    with pytest.raises(KtxError, match="Params has no field extra"):
        load_spec(tmp_path)


def test_struct_whose_header_is_not_found_says_so(tmp_path: Path) -> None:
    kernel = '#include "nowhere.h"\n' + SIGNATURE
    exc = error(tmp_path, '[[args]]\nname = "p"\nfields = { ncols = "n" }\n', kernel)
    assert "unknown type name 'Params'" in exc.message and "include path" in exc.message


def test_layout_per_instantiation_of_shape_template_args(tmp_path: Path) -> None:
    from ktx.measure.argpack import struct_layouts

    kernel = (
        "template <int V> struct P { char a; alignas(V) char b; };\n"
        "template <int V> __global__ void k(const float* x, float* y, P<V> p, int n) { y[0] = x[0]; }\n"
    )
    write(tmp_path, '[[args]]\nname = "p"\nfields = { a = 1, b = 2 }\n', kernel)
    toml = tmp_path / "ktx.toml"
    text = toml.read_text().replace('kernel = "k"', 'kernel = "k"\ntemplate_args = ["{v}"]')
    toml.write_text(text.replace("default = [{ n = 8 }]", "default = [{ n = 8, v = 4 }, { n = 8, v = 8 }]"))
    spec = load_spec(tmp_path)
    points = spec.shape_set().points
    four, eight = (struct_layouts(spec, spec.env(p))["p"] for p in points)
    assert (four.size, four.leaves[1].offset) == (8, 4)
    assert (eight.size, eight.leaves[1].offset) == (16, 8)


#: DeepSpeed's ragged descriptors: pointers to structs, read per element (``meta[i].start``).
POINTER_KERNEL = r"""
struct Batch { int n_tokens; int n_sequences; };
struct alignas(16) Seq { int start; int n; int seen; };
__global__ void k(const float* x, float* y, const Batch* batch, const Seq* seqs, int n) {
  int s = blockIdx.x;
  if (s >= batch->n_sequences) return;
  y[s] = x[seqs[s].start + seqs[s].n - 1];
}
"""

POINTER_ARGS = """[[args]]
name = "batch"
type = "Batch"
shape = "[1]"
fields.n_tokens = "n"
fields.n_sequences = "n // 4"
[[args]]
name = "seqs"
type = "Seq"
shape = "[n // 4]"
role = "in"
fields = { start = "i * 4", n = 4, seen = "i" }
"""


def test_an_array_of_structs_behind_a_pointer(tmp_path: Path) -> None:
    from ktx.measure.verify import seeded_inputs

    spec = load_spec(write(tmp_path, POINTER_ARGS, POINTER_KERNEL))
    batch, seqs = spec.args[2], spec.args[3]
    assert batch.is_array and batch.is_struct and batch.role == "in" and seqs.ctype == "Seq"
    point = spec.shape_set().points[0]  # n = 8: two sequences
    arrays = seeded_inputs(spec, point, seed=1)
    assert arrays["batch"].tobytes() == np.array([8, 2], np.int32).tobytes()
    # Seq is 16 bytes (alignas(16)): three ints and four bytes of zero padding, element by element
    words = arrays["seqs"].view(np.int32).reshape(2, 4)
    assert words.tolist() == [[0, 4, 0, 0], [4, 4, 1, 0]]


def test_a_python_reference_sees_each_elements_fields(tmp_path: Path) -> None:
    """The device check's reference path (``gpu._start_python`` / ``_python_want``: seeded
    inputs, then :func:`python_reference`) gives an array of structs' fields per element, with
    ``i`` bound as in the kernel's bytes; it once evaluated ``i * 4`` with no ``i`` and crashed
    with "unknown name 'i'" on the GPU."""
    from ktx.measure.verify import python_reference, seeded_inputs

    spec = load_spec(write(tmp_path, POINTER_ARGS, POINTER_KERNEL))
    point = spec.shape_set().points[0]  # n = 8: two sequences
    seen: dict[str, object] = {}

    def reference(inputs: dict[str, object], shape: dict[str, object]) -> dict[str, object]:
        seen.update(inputs)
        return {"y": np.zeros(8)}

    arrays = seeded_inputs(spec, point, seed=1)
    python_reference(spec, point, arrays, reference)
    seqs, batch = seen["seqs"], seen["batch"]
    assert isinstance(seqs, dict) and isinstance(batch, dict)
    assert {k: np.asarray(v).tolist() for k, v in seqs.items()} == {
        "start": [0, 4],
        "n": [4, 4],
        "seen": [0, 1],
    }
    assert {k: np.asarray(v).tolist() for k, v in batch.items()} == {"n_tokens": [8], "n_sequences": [2]}
    # the same values as the bytes the kernel gets (words: start, n, seen, padding)
    words = arrays["seqs"].view(np.int32).reshape(2, 4)
    assert words[:, :3].T.tolist() == [seqs["start"].tolist(), seqs["n"].tolist(), seqs["seen"].tolist()]


def test_an_array_of_structs_is_an_input_and_needs_a_pointer(tmp_path: Path) -> None:
    exc = error(tmp_path, POINTER_ARGS.replace('role = "in"', 'role = "out"'), POINTER_KERNEL)
    assert "an array of structs is an input" in exc.message
    by_value = POINTER_KERNEL.replace("const Seq* seqs", "Seq seqs").replace("seqs[s]", "seqs")
    exc = error(tmp_path, POINTER_ARGS, by_value)
    assert "arg 'seqs' is an array of structs (it has a shape), but parameter seqs" in exc.message
    exc = error(tmp_path, POINTER_ARGS.replace('shape = "[1]"\n', ""), POINTER_KERNEL)
    assert "arg 'batch' is a struct by value, but parameter batch" in exc.message
    assert "a pointer to one" in exc.message and exc.hint == "give it a shape"
