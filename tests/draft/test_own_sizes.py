"""Session 10: an integer the launch passes in a way ``ktx init`` does not follow, but that the
kernel uses as a size, is drafted as a shape variable of its own name, under a TODO that says
it is a guess (the real-code benchmark's most common hand edit was writing exactly that). An
integer the kernel does not use as a size stays a placeholder."""

from __future__ import annotations

from pathlib import Path

from ktx.draft.drafter import draft


def _above(text: str, line: str) -> str:
    lines = text.splitlines()
    return lines[lines.index(line) - 1]


# ``cols`` is a call's result at the launch (a tensor's size): ktx does not follow its value.
_SRC = (
    "struct T { int size(int d) const; };\n"
    "__global__ void k(float* y, const float* x, int rows, int cols, int seed) {\n"
    "  int r = blockIdx.x;\n"
    "  for (int c = threadIdx.x; c < cols; c += blockDim.x) y[r * cols + c] = x[r * cols + c] + seed;\n"
    "}\n"
    "void go(float* y, const float* x, const T& t, int seed0) {\n"
    "  int n = t.size(0);\n"
    "  k<<<n, 256>>>(y, x, t.size(0), t.size(1), seed0 ^ t.size(2));\n}\n"
)


def test_an_unfollowed_size_is_its_own_shape_variable_under_a_todo(tmp_path: Path) -> None:
    src = tmp_path / "f.cu"
    src.write_text(_SRC)
    d = draft(src, None, tmp_path)
    text = d.text
    assert _above(text, 'value = "cols"').startswith(
        "# TODO: value of cols: the launch at f.cu:8 passes something ktx does not follow; "
        "drafted as a shape variable 'cols'"
    )
    assert "c < cols" in _above(text, 'value = "cols"')
    default = next(ln for ln in text.splitlines() if ln.startswith("default ="))
    assert "cols" in default
    assert _above(text, default).startswith("# TODO: shape points:")
    assert any("drafted as a shape variable 'cols'" in c for c in d.checks)


def test_an_unfollowed_integer_that_is_no_size_stays_a_placeholder(tmp_path: Path) -> None:
    src = tmp_path / "f.cu"
    src.write_text(_SRC)
    text = draft(src, None, tmp_path).text
    seed = text.split('name = "seed"', 1)[1].split("[[args]]", 1)[0].split("[shapes]", 1)[0]
    assert 'value = "TODO"' in seed
    assert 'value = "seed"' not in text


def test_an_unfollowed_stride_is_no_size_of_its_own(tmp_path: Path) -> None:
    # ``ld`` only scales an index (a row pitch): issue 22 wants strides written from the sizes,
    # not swept as shape axes: a dense row of ``c < cols`` (ktx.ir.facts.strides), under a TODO
    src = tmp_path / "f.cu"
    src.write_text(
        _SRC.replace("int seed) {", "int seed, int ld) {")
        .replace("y[r * cols + c]", "y[r * ld + c]")
        .replace("seed0 ^ t.size(2))", "seed0 ^ t.size(2), t.size(3))")
    )
    text = draft(src, None, tmp_path).text
    ld = text.split('name = "ld"', 1)[1].split("[shapes]", 1)[0]
    assert ld.splitlines()[-2] == 'value = "cols"'
    assert ld.splitlines()[-3].startswith("# TODO: value of ld: a stride of the index r * ld + c;")
    assert "ld = [" not in text  # no shape axis of its own
    assert 'shape = "[n, cols]"' in text.split('name = "y"', 1)[1].split("[[args]]", 1)[0]  # y read as dense


# ``feature_size`` and ``space_size`` are launcher locals ktx does not follow (a tensor's size);
# the grid names one, the kernel bounds by the other.
_LOCALS = (
    "struct T { int size(int d) const; };\n"
    "__global__ void k(float* out, const float* x, int fs, int ss) {\n"
    "  for (int i = threadIdx.x; i < ss; i += blockDim.x) out[blockIdx.x] += x[blockIdx.x * ss + i];\n"
    "}\n"
    "void go(float* out, const float* x, const T& t) {\n"
    "  const int feature_size = t.size(0);\n  const int space_size = t.size(1);\n"
    "  dim3 grid(feature_size);\n"
    "  k<<<grid, 256>>>(out, x, feature_size, space_size);\n}\n"
)


def test_a_launcher_local_passed_as_it_is_names_the_shape_variable(tmp_path: Path) -> None:
    src = tmp_path / "f.cu"
    src.write_text(_LOCALS)
    text = draft(src, None, tmp_path).text
    # bounded by the kernel: the caller's name, under the TODO that says it is a guess
    assert _above(text, 'value = "space_size"').startswith("# TODO: value of ss:")
    # not bounded, but the drafted grid names the same local: the same variable
    assert _above(text, 'value = "feature_size"').startswith("# TODO: value of fs:")
    assert 'grid = ["feature_size"]' in text
    default = next(ln for ln in text.splitlines() if ln.startswith("default ="))
    assert "feature_size" in default and "space_size" in default and "fs =" not in default
    assert 'feature_size = "TODO"' not in text  # a shape variable, not a [vars] placeholder
