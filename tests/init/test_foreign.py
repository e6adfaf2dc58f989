"""``ktx init`` on kernels written the way other projects write them (issue 18's five cases):
template arguments deduced at the launch, dynamic shared memory carried, grid-stride loops
bounding extents, launcher locals as derived values, default shapes that fit and launch.

The kernels are in ``tests/init/foreign/``; goldens in ``tests/init/golden/`` (regenerate with
``KTX_UPDATE_GOLDEN=1``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ktx.ir import parse_file
from ktx.ir.facts.params import read_kernel, size_use

from ktx.draft import check, draft
from ktx.draft.sizing import size_shapes
from ktx.specload import load_spec
from tests.init.test_init import compare

FOREIGN = Path(__file__).parent / "foreign"
KERNELS = sorted(p.stem for p in FOREIGN.glob("*.cu"))
#: Issue 18's kinds of kernel whose drafts need no edit (rope_neox's three extents do).
FOREIGN_READY = (
    "gelu_and_mul",
    "group_quant_int8",
    "moe_sum_grid_stride",
    "moe_sum_while",
    "rmsnorm_dyn_smem",
)


def stage(tmp_path: Path, name: str, text: str | None = None) -> Path:
    out = tmp_path / "k"
    out.mkdir()
    (out / "ktx.toml").write_text(text if text is not None else draft(FOREIGN / f"{name}.cu", None, out).text)
    return out


@pytest.mark.parametrize("name", KERNELS)
def test_foreign_kernel_draft(name: str, tmp_path: Path) -> None:
    compare(name, draft(FOREIGN / f"{name}.cu", None, tmp_path).text)


def test_template_type_is_deduced_from_the_pointer_argument() -> None:
    text = draft(FOREIGN / "gelu_and_mul.cu").text
    assert 'template_args = ["__nv_bfloat16"]' in text
    assert "# note: T = __nv_bfloat16: deduced from the argument out (parameter out)" in text


def test_a_value_parameter_that_cannot_be_deduced_is_a_todo(tmp_path: Path) -> None:
    src = tmp_path / "t.cu"
    src.write_text(
        "template <typename T, int N>\n__global__ void a(T* x, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = N; }\n"
        "void go(float* x, int n) { a<<<(n + 255) / 256, 256>>>(x, n); }\n"
    )
    result = draft(src)
    assert 'template_args = ["float", "TODO"]' in result.text
    assert any("template argument N of a" in t for t in result.todos)


def test_dynamic_shared_memory_from_a_dim3_field_is_carried() -> None:
    text = draft(FOREIGN / "rmsnorm_dyn_smem.cu").text
    assert 'block = ["32", "min(max(d // 256, 1), 32)"]' in text
    assert 'shared = "min(max(d // 256, 1), 32) * 4"' in text


def test_shared_memory_ktx_cannot_read_is_a_todo_not_dropped(tmp_path: Path) -> None:
    src = tmp_path / "s.cu"
    src.write_text(
        "__global__ void a(float* x, int n) { extern __shared__ float s[]; int i = threadIdx.x;\n"
        "  if (i < n) { s[i] = x[i]; x[i] = s[n - 1 - i]; } }\n"
        "int smem_bytes(int n);\n"
        "void go(float* x, int n) { a<<<1, n, smem_bytes(n)>>>(x, n); }\n"
    )
    result = draft(src)
    want = "# TODO: dynamic shared memory of the launch at s.cu:4: ktx cannot translate 'smem_bytes(n)'"
    assert want in result.text
    assert 'shared = "TODO"' in result.text


@pytest.mark.parametrize("name", ["moe_sum_while", "moe_sum_grid_stride"])
def test_a_grid_stride_token_loop_bounds_the_extent_not_the_grid(name: str) -> None:
    text = draft(FOREIGN / f"{name}.cu").text
    assert 'shape = "[num_tokens, d]"' in text
    assert "256" not in "".join(line for line in text.splitlines() if line.startswith("shape ="))


def test_a_launcher_local_is_a_derived_value_not_a_shape_variable(tmp_path: Path) -> None:
    result = draft(FOREIGN / "group_quant_int8.cu", None, tmp_path / "k")
    assert "# note: gpb is the launcher's local (line 32), not a shape variable" in result.text
    assert 'gpb = "16 if num_tokens * hidden // group_size % 16 == 0 else 8 if' in result.text
    out = stage(tmp_path, "group_quant_int8", result.text)
    spec = load_spec(out)
    assert "gpb" not in spec.variables
    for point in spec.shape_set("default").points:
        grid, block = (
            spec.launch.grid[0].evaluate_int(spec.env(point)),
            spec.launch.block[0].evaluate_int(spec.env(point)),
        )
        assert grid > 0 and 0 < block <= 1024, (point, grid, block)


def test_a_local_set_in_a_loop_is_a_todo_in_vars(tmp_path: Path) -> None:
    src = tmp_path / "l.cu"
    src.write_text(
        "__global__ void a(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (i < n) x[i] = 0; }\n"
        "void go(float* x, int n) {\n  int t = 32;\n  while (t < n && t < 1024) t *= 2;\n"
        "  a<<<(n + t - 1) / t, t>>>(x, n); }\n"
    )
    result = draft(src)
    assert "# TODO: t: the launcher's local (line 4) is set in ways ktx does not follow" in result.text
    assert '\nt = "TODO"\n' in result.text
    assert "t = [" not in result.text, "t is not a shape variable"


def test_default_shapes_fit_the_memory_budget() -> None:
    sizing = size_shapes(
        {v: [64, 4096] for v in "abcd"},
        list("abcd"),
        [("[a, b, c, d]", 4), ("[a, d]", 2)],
        [],
        _launch(("a",), ("min(d, 1024)",)),
    )
    assert sizing.points is None
    largest = 1
    for values in sizing.values.values():
        largest *= max(values)
    assert largest * 4 <= 2 << 30 < 4096**4 * 4
    assert all(min(v) == 64 for v in sizing.values.values()), sizing.values
    assert "default sizes reduced" in sizing.notes[0]


def test_default_shapes_launch_at_every_point() -> None:
    sizing = size_shapes({"n": [4096, 1048576]}, ["n"], [("[n]", 4)], [], _launch(("1",), ("n",)))
    assert sizing.values["n"] == [1024] and sizing.points is None
    # Invalid whatever the value: only the valid points are listed.
    bad = size_shapes({"n": [64, 4096]}, [], [("[n]", 4)], [], _launch(("n - 64",), ("32",)))
    assert bad.points == [{"n": 4096}] and "grid (0,) has no blocks" in bad.notes[-1]


def test_drafts_without_todos_load(tmp_path: Path) -> None:
    for name in FOREIGN_READY:
        out = tmp_path / name
        out.mkdir()
        (out / "ktx.toml").write_text(draft(FOREIGN / f"{name}.cu", None, out).text)
        assert check(out) == [], name


def _launch(grid: tuple[str, ...], block: tuple[str, ...]):  # type: ignore[no-untyped-def]
    from ktx.ir.facts.launcher import LaunchDraft

    return LaunchDraft(grid, block, "0", "", ())


def test_an_extent_the_kernel_reaches_past_becomes_a_todo(tmp_path: Path) -> None:
    # b[i] is outside the guard that bounds a[i]: the subscript heuristic says [n] for both;
    # the bounds check sees b reach the whole grid and turns that line into a TODO.
    src = tmp_path / "g.cu"
    src.write_text(
        "__global__ void k(float* a, float* b, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (i < n) a[i] = 1.f;\n"
        "  b[i] = 2.f;\n}\n"
        "void go(float* a, float* b, int n) { k<<<(n + 255) / 256, 256>>>(a, b, n); }\n"
    )
    result = draft(src, None, tmp_path)
    assert 'name = "a"\ndtype = "fp32"\nshape = "[n]"' in result.text
    want = (
        '# TODO: extent of b: the guess "[n]" is too small: g.cu:4: b[i] reaches element 4,095 '
        "but b has 4,095 elements (shape [n]) at n=4095: blockIdx=(15, 0, 0) threadIdx=(255, 0, 0) "
        "(index 4,095)"
    )
    assert want in result.text, result.text
    assert result.todos and result.todos[0].startswith("extent of b: the guess")


def test_a_template_argument_the_launcher_leaves_open_is_a_todo(tmp_path: Path) -> None:
    # kernel<T, V> inside template <typename T> void go(...): "T" would compile only there.
    src = tmp_path / "t.cu"
    src.write_text(
        "template <typename T, int N, int M>\n"
        "__global__ void k(T* x, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = N; }\n"
        "template <typename T>\nvoid go(T* x, int n, int m) {\n  constexpr int V = 4;\n"
        "  k<T, V, m><<<(n + 255) / 256, 256>>>(x, n);\n}\n"
    )
    result = draft(src, None, tmp_path)
    # V is the launcher's constexpr: its value, which is in scope wherever the spec compiles.
    assert 'template_args = ["TODO", "4", "TODO"]' in result.text
    (todo,) = [t for t in result.todos if t.startswith("template argument")]
    assert "T: the launch passes 'T', a template parameter of the launcher go: which instantiation?" in todo
    assert (
        "M: the launch passes 'm', the launcher's parameter m: a template argument needs a constant" in todo
    )
    assert 'dtype = "TODO"' in result.text, "x's element type is T: unknown too"


def test_a_dim3_set_field_by_field_is_read_and_a_header_macro_is_no_shape_variable(tmp_path: Path) -> None:
    (tmp_path / "consts.h").write_text("#pragma once\n#define THREADS 128\n")
    src = tmp_path / "f.cu"
    src.write_text(
        '#include "consts.h"\n'
        "__global__ void k(float* x, unsigned long long n) {\n"
        "  unsigned long long i = (unsigned long long)blockIdx.x * THREADS + threadIdx.x;\n"
        "  if (i >= n) return;\n  x[i] *= 2.f;\n}\n"
        "void go(float* x, unsigned long long n) {\n  dim3 blocks, threads;\n"
        "  threads.x = THREADS;\n  blocks.x = (n + THREADS - 1) / THREADS;\n"
        "  k<<<blocks, threads>>>(x, n);\n}\n"
    )
    result = draft(src, None, tmp_path)
    assert result.todos == ()
    assert (
        '[vars]\n# note: THREADS is not a parameter: its value in the file\'s headers\nTHREADS = "128"'
        in result.text
    )
    assert 'grid = ["(n + THREADS - 1) // THREADS"]\nblock = ["THREADS"]' in result.text
    assert "THREADS = [" not in result.text, "not a shape variable"


def test_a_name_with_no_value_anywhere_is_a_todo_in_vars(tmp_path: Path) -> None:
    src = tmp_path / "f.cu"
    src.write_text(
        '#include "missing.h"\n'
        "__global__ void k(float* x, int n) {\n"
        "  int i = blockIdx.x * TILE + threadIdx.x; if (i < n) x[i] = 0; }\n"
        "void go(float* x, int n) { k<<<(n + TILE - 1) / TILE, TILE>>>(x, n); }\n"
    )
    result = draft(src, None, tmp_path)
    assert "# TODO: TILE: the launch or an extent names TILE, which is no parameter" in result.text
    assert '\nTILE = "TODO"\n' in result.text and "TILE = [" not in result.text


def test_a_bool_flag_is_one_not_a_size_and_a_pointer_moved_at_the_top_is_read(tmp_path: Path) -> None:
    src = tmp_path / "f.cu"
    src.write_text(
        "__global__ void k(float* x, int d, bool scale) {\n  x += blockIdx.x * d;\n"
        "  for (int i = threadIdx.x; i < d; i += blockDim.x) x[i] = scale ? 2.f * x[i] : x[i];\n}\n"
        "void go(float* x, int rows, int d, bool scale) { k<<<rows, 256>>>(x, d, scale); }\n"
    )
    text = draft(src, None, tmp_path).text
    assert '# scale: flags (bool), 1 = true (shape values are positive: for false, set value = "0")' in text
    assert "scale = [1]" in text
    # moved once, at the top, by a dense offset (session 11): its row of a [rows, d] array
    assert 'shape = "[rows, d]"' in text


def test_a_pointer_moved_in_a_loop_is_a_todo(tmp_path: Path) -> None:
    src = tmp_path / "f.cu"
    src.write_text(
        "__global__ void k(float* x, int d, int n) {\n"
        "  for (int r = blockIdx.x; r < n; r += gridDim.x) {\n    x += d;\n"
        "    for (int i = threadIdx.x; i < d; i += blockDim.x) x[i] = 2.f * x[i];\n  }\n}\n"
        "void go(float* x, int rows, int d) { k<<<rows, 256>>>(x, d, rows); }\n"
    )
    text = draft(src, None, tmp_path).text
    assert "# TODO: extent of x: the kernel moves the pointer (x set again at line 3)" in text


def test_an_extent_from_a_local_that_did_not_translate_is_not_empty(tmp_path: Path) -> None:
    # The launcher's size = t.size(0) does not translate; idx[start] with start < size must
    # not become shape = "[()]".
    src = tmp_path / "f.cu"
    src.write_text(
        "__global__ void k(float* out, const long* idx, long size) {\n"
        "  int start = blockIdx.x * blockDim.y + threadIdx.y;\n"
        "  if (start < size) out[start] = (float)idx[start];\n}\n"
        "struct Tensor { long size(int) const; };\n"
        "void go(float* out, const long* idx, const Tensor& t) {\n"
        "  const long size = t.size(0);\n  k<<<(size + 7) / 8, dim3(32, 8)>>>(out, idx, size);\n}\n"
    )
    text = draft(src, None, tmp_path).text
    assert "()" not in "".join(line for line in text.splitlines() if line.startswith("shape ="))


def test_a_launcher_local_doubled_in_an_if_chain_is_derived(tmp_path: Path) -> None:
    # DeepSpeed's layer norm launchers: threads <<= 1 or <<= 2 by hidden size, else throw.
    src = tmp_path / "f.cu"
    src.write_text(
        "__global__ void k(float* x, int d) {\n"
        "  for (int i = threadIdx.x; i < d; i += blockDim.x) x[blockIdx.x * d + i] = 0.f;\n}\n"
        "void go(float* x, int rows, int d) {\n  int threads = 128;\n"
        "  if (d > 4096 && d <= 8192)\n    threads <<= 1;\n  else if (d > 8192 && d <= 16384)\n"
        "    threads <<= 2;\n  else if (d > 16384)\n    throw 1;\n"
        "  k<<<rows, threads>>>(x, d);\n}\n"
    )
    result = draft(src, None, tmp_path)
    assert result.todos == ()
    want = (
        'threads = "128 * 2 ** 1 if d > 4096 and d <= 8192 else 128 * 2 ** 2 '
        'if d > 8192 and d <= 16384 else 128 if d > 16384 else 128"'
    )
    assert want in result.text, result.text
    assert 'block = ["threads"]' in result.text


def test_an_integer_the_kernel_only_shifts_by_is_a_todo_not_a_shape_variable() -> None:
    result = draft(FOREIGN / "group_fake_quant_bits.cu")
    want = "value of num_bits: the launcher passes its parameter num_bits"
    assert any(t.startswith(want) for t in result.todos)
    assert "num_bits =" not in result.text.split("[shapes]")[1].split("[launch]")[0]
    # group_size is compared (a loop bound): a size, drafted from the launch.
    assert 'value = "total_count // group_num"' in result.text


def test_a_point_where_a_size_scalar_is_zero_is_dropped() -> None:
    text = draft(FOREIGN / "group_fake_quant_bits.cu").text
    assert "total_count=64,group_num=4096: group_size = total_count // group_num is 0" in text
    assert "{ total_count = 64, group_num = 4096 }" not in text


@pytest.mark.parametrize(
    ("use", "is_size", "todo"),
    [
        ("if (i < n) x[i] = 0.f;", True, False),  # compared
        ("x[i * n] = 0.f;", True, False),  # indexes
        ("float* row = x + blockIdx.x * n; row[i] = 0.f;", True, False),  # offsets a pointer
        ("int m = n * 2; if (i < m) x[i] = 0.f;", True, False),  # through a local
        ("x[i] = (float)(1 << n);", False, True),  # a shift's amount
        ("int top = (1 << n) - 1; if (i < top) x[i] = 0.f;", False, True),  # a bit count, compared after
        ("x[i] = n;", False, True),  # a value written
        ("x[i] = 0.f;", False, False),  # unused: any value does, no TODO
    ],
)
def test_size_use(use: str, is_size: bool, todo: bool, tmp_path: Path) -> None:
    src = tmp_path / "u.cu"
    src.write_text(
        f"__global__ void a(float* x, int n) {{ int i = threadIdx.x; {use} }}\n"
        "void go(float* x, int n) { a<<<1, 32>>>(x, n); }\n"
    )
    module = parse_file(src)
    k = read_kernel(module, next(f for f in module.functions if f.name == "a"))
    assert (size_use(k, "n") is not None) == is_size
    assert any(t.startswith("value of n:") for t in draft(src).todos) == todo


def test_template_arguments_picked_by_a_shape_condition_are_a_todo() -> None:
    result = draft(FOREIGN / "softmax_branches.cu")
    # the first launch's arguments are the guess, under the TODO that lists every branch
    lines = result.text.splitlines()
    at = lines.index('template_args = ["1", "(128 / 32)"]')
    assert (
        lines[at - 1].startswith("# TODO: template arguments of row_softmax")
        and "drafted: this launch's" in lines[at - 1]
    )
    why = next(t for t in result.todos if t.startswith("template arguments of row_softmax"))
    # Each launch's arguments with its condition, and the launcher's `threads` as in scope there.
    assert "<1, (128 / 32)> if cols <= 32; <8, (128 / 32)> if cols <= 1024; <32, (256 / 32)>" in why
    # The block is `threads`, which the last branch declares again (256): a TODO, not 128 for all.
    block = next(t for t in result.todos if t.startswith("block of the launch"))
    assert (
        "[128] for the branches that see this declaration; the launcher declares it again at line 18" in block
    )
    assert 'block = ["TODO"]' in result.text


def test_a_launcher_constant_is_read_where_the_launch_sees_it(tmp_path: Path) -> None:
    src = tmp_path / "c.cu"
    src.write_text(
        "template <int W> __global__ void k(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] = W; }\n"
        "void go(float* x, int n) {\n  const int threads = 128;\n  k<(threads / 2)><<<1, threads>>>(x, n);\n"
        "  { const int threads = 256; k<(threads / 2)><<<1, threads>>>(x, n); }\n}\n"
    )
    text = draft(src).text
    # One launch outside any condition: its arguments, with the threads declared before it.
    assert 'template_args = ["(128 / 2)"]' in text


def test_dim3_fields_are_read_in_the_block_that_declares_the_local(tmp_path: Path) -> None:
    src = tmp_path / "d.cu"
    src.write_text(
        "__global__ void add(float* d, const float* s, int h, int w) {\n"
        "  int x = blockIdx.x * 32 + threadIdx.x; int y = blockIdx.y;\n"
        "  if (x < w && y < h) d[y * w + x] += s[x]; }\n"
        "__global__ void other(float* d, int h, int w) { d[0] = h + w; }\n"
        "void go(float* d, const float* s, int h, int w) {\n"
        "  if (w % 8 == 0) { dim3 block, grid; block.x = 64; grid.x = 1; other<<<grid, block>>>(d, h, w); }\n"
        "  else { dim3 block, grid; block.x = 32; grid.x = (w + 31) / 32; grid.y = h;\n"
        "    add<<<grid, block>>>(d, s, h, w); }\n}\n"
    )
    text = draft(src, "add").text
    assert 'grid = ["(w + 31) // 32", "h"]' in text
    assert 'block = ["32"]' in text
    assert "[vars]" not in text  # no shape variable named grid or block


def test_dim3_fields_ktx_cannot_follow_are_a_grid_todo_not_a_name(tmp_path: Path) -> None:
    src = tmp_path / "e.cu"
    src.write_text(
        "__global__ void add(float* d, int h, int w) {\n"
        "  int x = blockIdx.x * 32 + threadIdx.x; if (x < w) d[blockIdx.y * w + x] = h; }\n"
        "void go(float* d, int h, int w) {\n  if (w > 0) {\n"
        "    dim3 grid; grid.x = (w + 31) / 32; if (h > 1) grid.y = h; else grid.y = 1;\n"
        "    add<<<grid, 32>>>(d, h, w); }\n}\n"
    )
    text = draft(src).text
    assert "# TODO: grid of the launch of add at e.cu:6" in text
    assert 'grid = ["TODO"]' in text
    assert 'grid = ["grid"]' not in text


def test_an_integer_handed_to_a_helper_is_a_todo_that_does_not_claim_no_size(tmp_path: Path) -> None:
    # A kernel hands its stride to a device function the file only declares: the value is out
    # of sight, so the TODO asks instead of saying "no size" (and no default {64, 4096} stride).
    src = tmp_path / "h.cu"
    src.write_text(
        "__device__ void row(float* x, int stride, int j);\n"
        "__global__ void a(float* x, int stride) { row(x, stride, threadIdx.x); }\n"
        "void go(float* x, int stride) { a<<<1, 32>>>(x, stride); }\n"
    )
    result = draft(src)
    want = (
        "value of stride: the kernel passes it to row, which ktx does not read (a size, a stride, a count?)"
    )
    assert any(t.startswith(want) for t in result.todos), result.todos
    # Session 10: a helper the file defines is read (ir.facts.params.size_use follows the call):
    # the stride subscripts there, so it is a shape variable as if inline, and with x's extent
    # a TODO the value line is doubted, not silently a size of its own.
    src.write_text(src.read_text().replace("int j);", "int j) { x[j * stride] = 0.f; }"))
    text = draft(src).text
    lines = text.splitlines()
    at = lines.index('value = "stride"')
    assert lines[at - 1].startswith("# TODO: value of stride: the shape variable stride"), lines[at - 1]


def test_an_array_reached_only_through_helper_addresses_takes_their_offsets_extent() -> None:
    # ``load_16<16>(v, x + base)`` under ``base < count``, count = tokens * hidden at the launch:
    # the 2-D array the launcher describes; ``b + (base % cols)`` stays inside one row
    text = draft(FOREIGN / "bias_gelu_store_helpers.cu").text
    assert 'name = "x"\ndtype = "fp16"\nshape = "[tokens, hidden]"\nrole = "inout"' in text
    assert 'name = "b"\ndtype = "fp16"\nshape = "[hidden]"\nrole = "in"' in text
    # a callee whose name says neither load nor store: the same reading, under a TODO that says so
    want = (
        "# TODO: extent of sum_out: read from the address base into sum_out handed to accumulate_into, "
        'whose reach past it ktx does not see\nshape = "[tokens, hidden]"'
    )
    assert want in text


def test_an_array_indexed_through_a_float4_view_counts_its_own_elements() -> None:
    # ``xv[i]`` under ``i < n / 4``: n // 4 float4s are n floats; ``bv[i % row4]`` with
    # row4 = cols // 4 is a row of cols floats; the store through the cast makes ``out`` an output
    text = draft(FOREIGN / "residual_float4_view.cu").text
    assert 'name = "out"\ndtype = "fp32"\nshape = "[rows, cols]"\nrole = "out"' in text
    assert 'name = "x"\ndtype = "fp32"\nshape = "[rows, cols]"\nrole = "in"' in text
    assert 'name = "bias"\ndtype = "fp32"\nshape = "[cols]"\nrole = "in"' in text


@pytest.mark.parametrize("name", ["bias_gelu_store_helpers", "residual_float4_view"])
def test_helper_and_view_extents_leave_nothing_blocking(name: str, tmp_path: Path) -> None:
    assert check(stage(tmp_path, name)) == []


def test_a_view_extent_counted_in_view_elements_would_be_caught(tmp_path: Path) -> None:
    # the bounds check reads the view's accesses too: x as [cols] (not scaled) is reached past
    out = tmp_path / "k"
    out.mkdir()
    text = draft(FOREIGN / "residual_float4_view.cu", None, out).text
    wrong = text.replace('shape = "[rows, cols]"\nrole = "in"', 'shape = "[cols]"\nrole = "in"')
    assert wrong != text
    (out / "ktx.toml").write_text(wrong)
    found = check(out)
    assert any("load xv[i] reaches element" in b.message for b in found), found
