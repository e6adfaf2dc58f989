"""``ktx init`` drafts struct and vector parameters passed by value: one ``fields.`` line per
field of the struct's definition, values from what the launcher states, a TODO for the rest;
once the TODOs are filled the draft loads (the loader checks the fields against the layout)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ktx.ir.errors import KtxError
from ktx.ir.facts.structs import kernel_layouts

from ktx.draft import draft
from ktx.specload import load_spec

KERNEL = r"""#include <cuda_runtime.h>
struct Div { unsigned int mul; unsigned int shift; };
struct Params { int ncols; float scale; Div div; short coef[2]; };

__global__ void scale_rows(const float* __restrict__ x, float* __restrict__ y, Params p, uint3 fd, int rows) {
  int r = blockIdx.x;
  if (r >= rows) return;
  for (int c = threadIdx.x; c < p.ncols; c += blockDim.x)
    y[r * p.ncols + c] = x[r * p.ncols + c] * p.scale + fd.x;
}

void launch(const float* x, float* y, int rows, int d, cudaStream_t s) {
  Params p;
  p.ncols = d;
  p.div.mul = 3;
  p.div.shift = 2u;
  p.scale = 0.5f;
  scale_rows<<<rows, 256, 0, s>>>(x, y, p, make_uint3(d, 1, rows), rows);
}
"""

pytestmark = pytest.mark.skipif(not kernel_layouts(KERNEL, "scale_rows"), reason="libclang is not available")


def test_struct_fields_drafted_one_line_each(tmp_path: Path) -> None:
    (tmp_path / "kernel.cu").write_text(KERNEL)
    d = draft(tmp_path / "kernel.cu")
    text = d.text
    p_block = text[text.index('name = "p"') : text.index('name = "fd"')]
    assert p_block.splitlines()[1:] == [
        'type = "Params"',
        'fields.ncols = "d"',
        'fields.scale = "0.5"',
        'fields.div.mul = "3"',
        'fields.div.shift = "2"',
        "# TODO: values of p.coef (an array in Params)",
        'fields.coef = ["TODO", "TODO"]',
        "",
        "[[args]]",
    ]
    assert 'type = "uint3"\nfields.x = "d"\nfields.y = "1"\nfields.z = "rows"\n' in text
    assert d.todos.count("values of p.coef (an array in Params)") == 1
    assert "values of p.coef (an array in Params)" in d.todos
    # p is a struct, not a size: the shape variables are rows and d.
    assert "p = [" not in text and "d = [" in text and "rows = [" in text


def test_draft_with_todos_filled_loads(tmp_path: Path) -> None:
    (tmp_path / "kernel.cu").write_text(KERNEL)
    text = draft(tmp_path / "kernel.cu").text
    text = text.replace('fields.coef = ["TODO", "TODO"]', "fields.coef = [1, 2]")
    text = text.replace('shape = "[TODO]"', 'shape = "[rows, d]"')
    assert 'TODO"' not in text.replace("# TODO", "")
    (tmp_path / "ktx.toml").write_text(text)
    spec = load_spec(tmp_path)
    p = next(a for a in spec.args if a.name == "p")
    assert [n for n, _ in p.fields] == ["ncols", "scale", "div.mul", "div.shift", "coef[0]", "coef[1]"]


def test_draft_with_a_todo_left_does_not_load(tmp_path: Path) -> None:
    (tmp_path / "kernel.cu").write_text(KERNEL)
    text = draft(tmp_path / "kernel.cu").text.replace('shape = "[TODO]"', 'shape = "[rows, d]"')
    (tmp_path / "ktx.toml").write_text(text)
    with pytest.raises(KtxError, match="TODO"):
        load_spec(tmp_path)


def test_a_plain_struct_of_a_template_kernel_whose_arguments_are_not_deduced(tmp_path: Path) -> None:
    """ggml's ``rope_norm<forward, has_ff, T, D>`` takes ``rope_corr_dims corr_dims``, a struct
    that does not depend on the template parameters: drafted as fields even though the launch
    leaves ``T`` to the launcher's own template parameter; a ``Box<T>`` that does is not."""
    (tmp_path / "kernel.cu").write_text(
        "struct corr { float v[2]; };\n"
        "template <typename T> struct Box { T lo; };\n"
        "template <typename T>\n"
        "__global__ void k(const T* x, T* y, corr c, Box<T> b, int n) {\n"
        "  int i = threadIdx.x; if (i < n) y[i] = x[i] * c.v[0] + b.lo; }\n"
        "template <typename T> void run(const T* x, T* y, corr c, Box<T> b, int n) {\n"
        "  k<T><<<1, 256>>>(x, y, c, b, n); }\n"
    )
    text = draft(tmp_path / "kernel.cu").text
    c_block = text[text.index('name = "c"') : text.index('name = "b"')]
    assert 'type = "corr"' in c_block and 'fields.v = ["TODO", "TODO"]' in c_block
    b_block = text[text.index('name = "b"') : text.index('name = "n"')]
    assert "fields." not in b_block


def test_a_pointer_to_structs_is_drafted_as_an_array_of_them(tmp_path: Path) -> None:
    """DeepSpeed's ``const RaggedBatchDescriptor* batch``: ``type`` and one ``fields.`` TODO a
    field (each element's), no ``dtype`` TODO; filled in, the draft loads as an array of structs."""
    (tmp_path / "kernel.cu").write_text(
        "struct Seq { int start; int n; };\n"
        "__global__ void k(const float* x, float* y, const Seq* seqs, int d) {\n"
        "  const Seq s = seqs[blockIdx.x];\n"
        "  for (int c = threadIdx.x; c < d; c += blockDim.x)\n"
        "    y[blockIdx.x * d + c] = x[(s.start + s.n - 1) * d + c];\n"
        "}\n"
        "void go(const float* x, float* y, const Seq* seqs, int n, int d) { k<<<n, 128>>>(x, y, seqs, d); }\n"
    )
    d = draft(tmp_path / "kernel.cu")
    block = d.text[d.text.index('name = "seqs"') : d.text.index('name = "d"')]
    assert 'type = "Seq"' in block and 'fields.start = "TODO"' in block and 'fields.n = "TODO"' in block
    assert "dtype" not in block
    assert "value of seqs.start (int field of Seq)" in d.todos


def test_a_pointer_to_a_cuda_vector_type_is_no_array_of_structs(tmp_path: Path) -> None:
    (tmp_path / "kernel.cu").write_text(
        "__global__ void k(const float4* x, float4* y, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = x[i]; }\n"
        "void go(const float4* x, float4* y, int n) { k<<<(n + 255) / 256, 256>>>(x, y, n); }\n"
    )
    text = draft(tmp_path / "kernel.cu").text
    assert "fields." not in text and 'type = "float4"' not in text


POINTER_KERNEL = r"""#include <cuda_runtime.h>
struct ConvParams { int batch, dim; void* __restrict__ x_ptr; void* out_ptr; int* idx_ptr; };

__global__ void conv(ConvParams params) {
  int c = blockIdx.y * blockDim.x + threadIdx.x;
  if (c >= params.dim) return;
  float* x = reinterpret_cast<float*>(params.x_ptr) + blockIdx.x * params.dim;
  float* out = reinterpret_cast<float*>(params.out_ptr) + blockIdx.x * params.dim;
  out[c] = x[c] * 2.0f;
}

void launch(ConvParams& params, cudaStream_t s) {
  dim3 grid(params.batch, (params.dim + 63) / 64);
  conv<<<grid, 64, 0, s>>>(params);
}
"""


def test_pointer_fields_are_drafted_as_buffers(tmp_path: Path) -> None:
    """causal-conv1d's pattern: the struct holds the buffers. Each pointer field names a
    ``[[buffers]]`` table drafted after the fields (its dtype, shape, role TODOs), and the names
    are not taken for shape variables; filled in, the draft loads."""
    (tmp_path / "kernel.cu").write_text(POINTER_KERNEL)
    d = draft(tmp_path / "kernel.cu")
    text = d.text
    assert (
        'fields.x_ptr = "x"' in text and 'fields.out_ptr = "out"' in text and 'fields.idx_ptr = "idx"' in text
    )
    assert text.splitlines().count("[[buffers]]") == 3
    todo_block = 'name = "{}"  # TODO: see above\ndtype = "TODO"\nshape = "[TODO]"\nrole = "TODO"\n'
    assert "[[buffers]]\n" + todo_block.format("out") in text
    assert sum("points at a buffer, drafted as [[buffers]]" in t for t in d.todos) == 3
    assert "\nx = " not in text and "\nout = " not in text  # no [vars] or shape variables
    assert "# TODO: shape points: drafted while the extents or values of x, out, idx" in text
    filled = (
        text.replace('fields.batch = "TODO"', 'fields.batch = "b"')
        .replace('fields.dim = "dim"', 'fields.dim = "n"')  # drafted a size of its own (c >= params.dim)
        .replace('fields.idx_ptr = "idx"', 'fields.idx_ptr = "0"')  # a null pointer: no buffer
        .replace("[[buffers]]\n" + todo_block.format("idx"), "")
        .replace(todo_block.format("x"), 'name = "x"\ndtype = "fp32"\nshape = "[b, n]"\nrole = "in"\n')
        .replace(todo_block.format("out"), 'name = "out"\ndtype = "fp32"\nshape = "[b, n]"\nrole = "out"\n')
        .replace("default = { product = { dim = [4096, 1048576] } }", "default = [{ b = 2, n = 128 }]")
        .replace("quick = [{ dim = 4096 }]", "quick = [{ b = 2, n = 128 }]")
        .replace('grid = ["TODO"]', 'grid = ["b", "(n + 63) // 64"]')
    )
    (tmp_path / "ktx.toml").write_text(filled)
    spec = load_spec(tmp_path)
    (params,) = spec.args
    assert params.pointers == (("x_ptr", "x"), ("out_ptr", "out"))
    assert [b.name for b in spec.buffers] == ["x", "out"]
