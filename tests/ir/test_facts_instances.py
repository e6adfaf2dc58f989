"""The instantiations a file makes of a template function (``ktx.ir.facts.instances``), and
``ktx init``'s use of them: where a kernel's template argument is the launcher's own template
parameter, the draft takes one of the launcher's instantiations (fp32 first, then the file's
order) as a guess under a TODO that names the others (the guessed element types and the
extents counted in them say so too)."""

from __future__ import annotations

from pathlib import Path

from ktx.ir.facts.instances import instances, split_args

from ktx.draft.drafter import draft

SRC = """\
enum Kind { Plain = 0, Packed = 1 };
template <typename T, int KIND>
__global__ void k(T* y, const T* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = KIND ? x[i] + x[i] : x[i];
}
template <typename T, int KIND>
void launch(T* y, const T* x, int n) { k<T, KIND><<<(n + 255) / 256, 256>>>(y, x, n); }
#define INSTANTIATE(T, K) \\
  template void launch<T, K>(T* y, const T* x, int n);
INSTANTIATE(__half, Plain)
INSTANTIATE(float, Packed)
template void launch<double, Plain>(double* y, const double* x, int n);
"""


def test_instances_reads_explicit_ones_calls_and_macro_expansions() -> None:
    got = instances(SRC, "launch")
    assert [(i.args, i.how) for i in got] == [
        (("__half", "Plain"), "macro INSTANTIATE"),
        (("float", "Packed"), "macro INSTANTIATE"),
        (("double", "Plain"), "template"),
    ]
    assert got[0].line == 11
    assert instances("void f() { launch<float, 1>(y, x, n); }", "launch")[0].how == "call"
    assert instances("bool b = a < launch > (c);", "launch") == ()  # no template argument list


def test_split_args_keeps_nested_commas() -> None:
    assert split_args("half, Traits<64, 4>, f(1, 2)") == ("half", "Traits<64, 4>", "f(1, 2)")


def _above(text: str, line: str) -> str:
    lines = text.splitlines()
    return lines[lines.index(line) - 1]


def test_the_draft_guesses_the_fp32_instantiation_under_a_todo(tmp_path: Path) -> None:
    src = tmp_path / "f.cu"
    src.write_text(SRC)
    d = draft(src, "k", tmp_path)
    text = d.text
    # fp32 before the 16-bit types and fp64 (ktx.ir.facts.dtypes.guess_rank), whatever the order
    line = 'template_args = ["float", "Packed"]'
    assert line in text
    todo = _above(text, line)
    assert todo.startswith("# TODO: template arguments of k: T = float, KIND = Packed: guessed")
    assert "T = float, KIND = Packed: guessed" in todo
    assert "others give T __half, double; KIND Plain" in todo
    # the element type that follows from the guess is flagged too
    dtype = _above(text, 'dtype = "fp32"')
    assert dtype.startswith("# TODO: element type of y: template parameter T, guessed")
    assert any("guessed" in c for c in d.checks)


def test_among_16_bit_instantiations_the_first_is_the_guess(tmp_path: Path) -> None:
    src = tmp_path / "f.cu"
    src.write_text(SRC.replace("INSTANTIATE(float, Packed)", "INSTANTIATE(__nv_bfloat16, Packed)"))
    assert 'template_args = ["__half", "Plain"]' in draft(src, "k", tmp_path).text


def test_a_launcher_with_no_instantiation_leaves_the_argument_a_todo(tmp_path: Path) -> None:
    src = tmp_path / "f.cu"
    src.write_text(SRC.split("#define")[0])
    text = draft(src, "k", tmp_path).text
    assert 'template_args = ["TODO", "TODO"]' in text
