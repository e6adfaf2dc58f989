"""Every corpus file states what the index must find (``// EXPECT: key=value ...``); check it.

The corpus (``tests/corpus``) is self-written CUDA exercising what production kernels use;
the first comment line of each file says what it exercises (``// CORPUS: ...``). Keys:

==================  ===============================================================
``kernels``         kernel names in source order (``-`` for none)
``device``          device function names in source order
``loops``           number of loops; ``launches``: number of launch sites
``launch_kernels``  kernel named by each launch site; ``launch_macros`` / ``launch_apis`` /
                    ``launch_wrappers``: the ``#define`` holding it / the runtime call /
                    the project's launch helper it goes through (``-`` for none)
``warnings``        number of warnings (``warnings>=N`` for a lower bound); ``errors`` too
``error_in``        the kernel every error diagnostic names
``defines``         ``NAME:value`` (``none``: not an integer) for ``#define``s
``constexprs``      ``NAME:value`` for constant integers
``shared``          shared array names in source order
``unroll``          per loop: unroll factor text without blanks, ``-`` for a bare
                    ``#pragma unroll``, ``none`` for no unroll pragma
``bounds``          ``kernel:threads[/blocks]`` (``none``: no ``__launch_bounds__``)
``kinds`` ``vars``  per loop: kind, induction variable (``-`` for none)
``depths``          per loop: nesting depth; ``parents``: parent loop id (``-`` for none)
==================  ===============================================================
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ktx.ir import Module, parse_file

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
FILES = sorted(p for p in CORPUS.iterdir() if p.suffix in (".cu", ".cuh"))
_EXPECT = re.compile(r"^//\s*EXPECT:(.*)$", re.M)
_ITEM = re.compile(r"(\w+)(>=|=)(\S+)")


def expectations(path: Path) -> dict[str, tuple[str, str]]:
    text = path.read_bytes().decode("utf-8").replace("\r\n", "\n")
    found: dict[str, tuple[str, str]] = {}
    for line in _EXPECT.findall(text):
        for key, op, value in _ITEM.findall(line):
            assert key not in found, f"{path.name}: {key} given twice"
            found[key] = (op, value)
    return found


def names(value: str) -> list[str]:
    return [] if value == "-" else value.split(",")


def pairs(value: str) -> dict[str, str]:
    return dict(item.split(":", 1) for item in value.split(","))


def dash(value: object) -> str:
    return "-" if value is None else str(value)


def actual(m: Module, key: str) -> object:
    """What the module says for one EXPECT key, in the form the header writes it."""
    if key == "kernels":
        return [k.name for k in m.kernels]
    if key == "device":
        return [f.name for f in m.device_functions]
    if key == "loops":
        return len(m.loops)
    if key == "launches":
        return len(m.launch_sites)
    if key == "launch_kernels":
        return [s.kernel for s in m.launch_sites]
    if key == "launch_macros":
        return [dash(s.macro) for s in m.launch_sites]
    if key == "launch_apis":
        return [dash(s.api) for s in m.launch_sites]
    if key == "launch_wrappers":
        return [dash(s.wrapper) for s in m.launch_sites]
    if key == "warnings":
        return sum(d.severity == "warning" for d in m.diagnostics)
    if key == "errors":
        return sum(d.severity == "error" for d in m.diagnostics)
    if key == "shared":
        return [a.name for a in m.shared_arrays]
    if key == "unroll":
        return [
            "none"
            if lp.pragma is None or not lp.pragma.is_unroll
            else (lp.pragma.unroll_factor or "-").replace(" ", "")
            for lp in m.loops
        ]
    if key == "kinds":
        return [lp.kind for lp in m.loops]
    if key == "vars":
        return [dash(lp.var) for lp in m.loops]
    if key == "depths":
        return [str(lp.depth) for lp in m.loops]
    if key == "parents":
        return [dash(lp.parent) for lp in m.loops]
    raise AssertionError(f"unknown EXPECT key {key!r}")


def expected(key: str, value: str) -> object:
    if key in ("loops", "launches", "warnings", "errors"):
        return int(value)
    return names(value)


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_corpus_file_meets_its_expectations(path: Path) -> None:
    text = path.read_bytes().decode("utf-8")
    assert text.startswith("// CORPUS: "), f"{path.name}: first line must say what it exercises"
    expect = expectations(path)
    assert "kernels" in expect, f"{path.name}: no EXPECT: kernels=..."
    m = parse_file(path)
    for key, (op, value) in expect.items():
        if key == "error_in":
            errors = [d for d in m.diagnostics if d.severity == "error"]
            assert errors and all(f"kernel {value!r}" in d.message for d in errors), (path.name, errors)
        elif key in ("defines", "constexprs"):
            records = m.macros if key == "defines" else m.constants
            values = {r.name: r.int_value for r in records}
            for name, want in pairs(value).items():
                assert name in values, f"{path.name}: {name} not indexed"
                assert dash(values[name]) == (want if want != "none" else "-"), (path.name, name)
        elif key == "bounds":
            kernels = {k.name: k for k in m.kernels}
            for name, want in pairs(value).items():
                lb = kernels[name].launch_bounds
                blocks = f"/{lb.min_blocks}" if lb is not None and lb.min_blocks else ""
                got = "none" if lb is None else lb.max_threads + blocks
                assert got.replace(" ", "") == want, (path.name, name, got)
        elif op == ">=":
            got = actual(m, key)
            assert isinstance(got, int) and got >= int(value), (path.name, key, got)
        else:
            assert actual(m, key) == expected(key, value), (path.name, key)


def test_corpus_is_large_enough() -> None:
    assert 10 <= len(FILES) <= 20
