"""Spec loading: the suite's specs validate; bad specs fail naming the key and its line."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from ktx.ir.errors import KtxError
from ktx.ir.expr import expand

from ktx.spec import ShapePoint, find_specs, parse_spec
from ktx.specload import load_spec

ROOT = Path(__file__).resolve().parents[1]
SUITE = find_specs(ROOT / "kernels")
KERNELS = ROOT / "kernels"

GOOD = """\
kernel = "k"
template_args = ["float"]

[vars]
half = "d // 2"

[[args]]
name = "out"
dtype = "fp32"
shape = "[tokens, d]"
role = "out"

[[args]]
name = "inp"
dtype = "bf16"
shape = "[tokens, 2 * d]"
dist = "uniform"
low = -2.0

[[args]]
name = "d"
dtype = "int32"
value = "d"

[shapes]
default = [{tokens = 1, d = 8}, {tokens = 2, d = 16}]
[shapes.big]
product = {tokens = [1, 4], d = [64, 128]}

[launch]
grid = ["tokens"]
block = ["min(half, 256)"]

[constraints]
odd = {d = [1, -3]}
"""


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "kernel.cu").write_text("__global__ void k() {}\n")
    (tmp_path / "ktx.toml").write_text(text)
    return tmp_path


def test_suite_is_present() -> None:
    names = {p.name for p in SUITE}
    assert {"silu_and_mul", "rmsnorm", "fused_add_rmsnorm", "merge_attn_states"} <= names


@pytest.mark.parametrize("folder", SUITE, ids=lambda p: p.name)
def test_suite_spec_validates(folder: Path) -> None:
    spec = load_spec(folder)
    assert spec.source_text()
    assert spec.kernel in spec.source_text()
    for shape_set in spec.shapes:
        for point in shape_set.points:
            env = spec.env(point)
            assert spec.bytes_moved(env) > 0
            grid = [e.evaluate_int(env) for e in spec.launch.grid]
            block = [e.evaluate_int(env) for e in spec.launch.block]
            assert all(g >= 1 for g in grid) and all(b >= 1 for b in block)
            assert 1 <= __import__("math").prod(block) <= 1024
            assert "{" not in expand(spec.name_expression, env)
    if spec.reference.python:
        module = spec.reference.python.split(":")[0]
        assert (folder / f"{module}.py").is_file()


def test_good_spec_details(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, GOOD))
    assert spec.kernel == "k" and spec.name_expression == "k<float>"
    assert spec.variables == ("tokens", "d")
    assert [p.name for p in spec.shape_set().points] == ["tokens=1,d=8", "tokens=2,d=16"]
    assert len(spec.shape_set("big").points) == 4
    point = spec.shape_set().points[1]
    env = spec.env(point)
    assert env["half"] == 8
    assert spec.args[1].dims(env) == (2, 32)
    assert spec.args[1].dist.param("low") == -2.0 and spec.args[1].dist.param("high") == 1.0
    assert spec.args[0].role == "out" and spec.args[1].role == "in" and spec.args[2].role == "scalar"
    assert spec.bytes_moved(env) == 2 * 16 * 4 + 2 * 32 * 2
    assert [p.name for p in spec.odd_points(point)] == ["tokens=2,d=17", "tokens=2,d=13"]
    assert spec.reference.use == "original"
    assert spec.launch.shared.evaluate({}) == 0
    assert spec.find_point("tokens=2,d=16") == point
    assert ShapePoint.from_name(point.name) == point


def test_zipped_product_and_placeholders(tmp_path: Path) -> None:
    text = GOOD.replace('template_args = ["float"]', 'template_args = ["float", "{topk}"]')
    text = text.replace(
        "[shapes]\ndefault = [{tokens = 1, d = 8}, {tokens = 2, d = 16}]\n[shapes.big]\n"
        "product = {tokens = [1, 4], d = [64, 128]}",
        '[shapes.default]\nproduct = {tokens = [1, 2], "d,topk" = [[8, 2], [16, 4]]}',
    )
    spec = load_spec(write(tmp_path, text))
    names = [p.name for p in spec.shape_set().points]
    assert names == ["tokens=1,d=8,topk=2", "tokens=1,d=16,topk=4",
                     "tokens=2,d=8,topk=2", "tokens=2,d=16,topk=4"]  # fmt: skip
    env = spec.env(spec.shape_set().points[1])
    assert expand(spec.name_expression, env) == "k<float, 4>"


def line_of(text: str, needle: str, nth: int = 0) -> int:
    lines = [i + 1 for i, line in enumerate(text.splitlines()) if needle in line]
    return lines[nth]


# (replace this, with that, expected message fragment, line containing this marker)
BAD = [
    ('kernel = "k"', 'kernel = "k"\nkernal_typo = 1', "unknown key 'kernal_typo'", "kernal_typo"),
    ('kernel = "k"', "kernel = 3", "expected a string", "kernel = 3"),
    ('kernel = "k"', 'kernel = "not valid"', "not a C++ identifier", "kernel ="),
    ('kernel = "k"', 'kernel = "k"\nsource = "missing.cu"', "not found", "source ="),
    ('dtype = "bf16"', 'dtype = "bf17"', "unknown dtype 'bf17'", "bf17"),
    ('role = "out"', 'role = "output"', "role must be", "role ="),
    ('shape = "[tokens, 2 * d]"', 'shape = "[tokens, 2 * dd]"', "unknown name 'dd'", "2 * dd"),
    ('shape = "[tokens, 2 * d]"', 'shape = "[tokens, 2 * ]"', "invalid expression", "2 * ]"),
    ('dist = "uniform"', 'dist = "gauss"', "unknown distribution", "gauss"),
    ("low = -2.0", "std = 2.0", "unknown key 'std'", "std ="),
    ("low = -2.0", 'low = "x"', "expected a number", "low ="),
    ('value = "d"', 'value = "d"\nshape = "[d]"', "takes no 'shape'", 'shape = "[d]"'),
    ('name = "d"\ndtype = "int32"', 'name = "d"\ndtype = "fp8_e4m3"', "by-value", 'dtype = "fp8_e4m3"'),
    ('name = "inp"', 'name = "out"', "duplicate argument", 'name = "out"', 1),
    ('grid = ["tokens"]', 'grid = ["tokens", 1, 1, 1]', "1 to 3", "grid ="),
    ('grid = ["tokens"]', 'grid = ["tokens / 2"]', "not an integer", "grid ="),
    ('grid = ["tokens"]', 'grid = ["tokens"]\nthreads = 3', "unknown key 'threads'", "threads ="),
    ('block = ["min(half, 256)"]', 'block = ["mini(half, 256)"]', "unknown function 'mini'", "mini("),
    ("[launch]", "[lunch]", "unknown key 'lunch'", "[lunch]"),
    ("{tokens = 2, d = 16}", "{tokens = 2, dd = 16}", "sets tokens, dd", "dd = 16"),
    ("{tokens = 2, d = 16}", "{tokens = 2, d = -16}", "positive integer", "d = -16"),
    ("{tokens = 2, d = 16}", '{tokens = 2, d = "16"}', "positive integer", 'd = "16"'),
    ("d = [64, 128]", "d = [64, true]", "positive integers", "d = [64, true]"),
    ("odd = {d = [1, -3]}", "odd = {x = [1]}", "not a shape variable", "odd ="),
    ("odd = {d = [1, -3]}", 'odd = {d = "1"}', "integer offsets", "odd ="),
    ("odd = {d = [1, -3]}", 'require = ["d % 16 == 0"]', "violates constraint", "{tokens = 1, d = 8}"),
    ('half = "d // 2"', 'half = "d // 2"\ntokens = "1"', "redefines", "[vars]"),
    ("[constraints]", '[reference]\npython = "nope:f"\n[constraints]', "no nope.py", "python ="),
    ("[constraints]", '[reference]\nuse = "python"\n[constraints]', "needs python", "use ="),
    ("[constraints]", "[tolerance]\nbf16 = {rtol = -1.0}\n[constraints]", "must not be negative", "bf16 ="),
    ("[constraints]", "[tolerance]\nbf99 = {rtol = 1.0}\n[constraints]", "unknown dtype 'bf99'", "bf99"),
    ("[constraints]", "[tolerance]\nbf16 = {rtl = 1.0}\n[constraints]", "unknown key 'rtl'", "bf16 ="),
    ("[constraints]", "[verify]\nrounds = 1\n[constraints]", "at least 3", "rounds = 1"),
    ("[constraints]", '[compile]\nflags = "-O3"\n[constraints]', "array of strings", "flags ="),
    ("[launch]", "[shapes.empty]\nfoo = 1\n[launch]", "needs 'product'", "[shapes.empty]"),
    ('kernel = "k"', 'kernel = "k"\nbytes = "tokens * d * q"', "unknown name 'q'", "bytes ="),
]


@pytest.mark.parametrize("case", BAD, ids=[c[2] for c in BAD])
def test_bad_spec_names_key_and_line(tmp_path: Path, case: tuple[str, ...]) -> None:
    old, new, fragment, marker = case[:4]
    nth = int(case[4]) if len(case) > 4 else 0
    assert old in GOOD
    text = GOOD.replace(old, new, 1)
    with pytest.raises(KtxError) as info:
        load_spec(write(tmp_path, text))
    err = info.value
    assert fragment in str(err), str(err)
    assert err.location is not None and err.location.path is not None
    assert err.location.path.endswith("ktx.toml")
    assert err.location.line == line_of(text, marker, nth), str(err)


def test_missing_pieces(tmp_path: Path) -> None:
    for needle, fragment in [("[launch]", "missing key 'launch'"), ("[[args]]", "missing [[args]]")]:
        start = GOOD.index(needle)
        end = GOOD.find("\n[", start + len(needle))
        text = GOOD[:start] + (GOOD[end + 1 :] if end >= 0 else "")
        if needle == "[[args]]":
            text = GOOD[: GOOD.index("[[args]]")] + GOOD[GOOD.index("[shapes]") :]
        with pytest.raises(KtxError, match=fragment.replace("[", r"\[")):
            load_spec(write(tmp_path, text))


def test_invalid_toml_reports_line(tmp_path: Path) -> None:
    with pytest.raises(KtxError) as info:
        load_spec(write(tmp_path, GOOD.replace('kernel = "k"', "kernel = ")))
    assert info.value.location is not None and info.value.location.line == 1


def test_no_spec_file(tmp_path: Path) -> None:
    with pytest.raises(KtxError, match="cannot read spec"):
        load_spec(tmp_path)


def test_parse_spec_expression_column(tmp_path: Path) -> None:
    write(tmp_path, GOOD)
    text = GOOD.replace('shape = "[tokens, 2 * d]"', 'shape = "[tokens, 2 * dd]"')
    with pytest.raises(KtxError) as info:
        parse_spec(text, tmp_path / "ktx.toml")
    loc = info.value.location
    assert loc is not None
    line = text.splitlines()[loc.line - 1]
    assert line[loc.col - 1 :].startswith("dd"), (line, loc)


def test_include_dirs_start_at_the_source_files_folder(tmp_path: Path) -> None:
    """``#include "common.h"`` resolves beside the source, as a C compiler would, also when the
    spec was drafted in another folder (ktx init --out); the spec's folder comes second."""
    src_dir = tmp_path / "src"
    src_dir.mkdir()
    shutil.copyfile(KERNELS / "silu_and_mul" / "kernel.cu", src_dir / "kernel.cu")
    spec_dir = tmp_path / "spec"
    spec_dir.mkdir()
    text = (KERNELS / "silu_and_mul" / "ktx.toml").read_text()
    text = re.sub(r'(?m)^source = ".*"$', 'source = "../src/kernel.cu"', text)
    (spec_dir / "ktx.toml").write_text(text)
    shutil.copyfile(KERNELS / "silu_and_mul" / "reference.py", spec_dir / "reference.py")
    spec = load_spec(spec_dir)
    assert spec.include_dirs == (str(src_dir.resolve()), str(spec_dir.resolve()))
    assert load_spec(KERNELS / "silu_and_mul").include_dirs == (str((KERNELS / "silu_and_mul").resolve()),)


def test_a_spec_without_shape_variables_round_trips_its_one_point() -> None:
    """cuda-samples' vectorAdd fixes every size (``default = [{}]``): its one point is named ``''``,
    and that name is read back as the empty point (it crashed ``ktx bench`` on an H200)."""
    empty = ShapePoint(())
    assert empty.name == ""
    assert ShapePoint.from_name(empty.name) == empty
    assert ShapePoint.from_name("  ") == empty
    with pytest.raises(KtxError):
        ShapePoint.from_name("tokens=1,")
