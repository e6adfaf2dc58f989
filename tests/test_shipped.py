"""Shipped = measured (issue 18, item 4): the emitted variant source, the patch, the dispatch
header and the torch export hold, byte for byte, the instantiation the harness compiled.

The harness compiles ``Tunable.from_template(spec, template).candidate(config)``; ``ktx apply
--config`` prints ``template.instantiate(config)``; ``ktx tune``/``optimize`` write the variant
files; ``ktx report`` puts each variant in ``namespace ktx_variant_N`` of the patched kernel file
(its ``#include`` lines noted, its global functions suffixed ``_ktxN``); ``ktx export --torch``
puts it in ``namespace ktx_vN`` of ``kernels.cu`` (its includes hoisted). Each test undoes only
those documented wrappings and compares bytes: per config, on the suite's kernels, on llm.c's
naive kernels (skipped without ``shared/llmc``), and end to end on a replayed optimize run.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType

import pytest

from ktx.cli import main
from ktx.measure.types import Candidate
from ktx.pipeline import candidate_from_template, template_for_spec
from ktx.report.diffs import global_functions, tuned_source
from ktx.search.tunable import Tunable
from ktx.spec import Spec
from ktx.specload import load_spec
from ktx.template import Template
from ktx.torch_export import VARIANT_HEADER, Variant, cuda_source, without_knob_line

ROOT = Path(__file__).resolve().parents[1]
SILU = ROOT / "kernels" / "silu_and_mul"
PASSES = ("block-size", "unroll", "vectorize", "fast-math", "expose")
#: The export hoists ``#include`` lines above its namespaces: each leaves an empty line.
_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*[<\"].*$", re.M)


def patch_block(tuned: str, index: int, functions: tuple[str, ...]) -> str:
    """Variant ``index`` as the patched kernel file holds it, its wrapping undone."""
    m = re.search(
        rf"^namespace ktx_variant_{index} \{{\n(.*)\n\}}  // namespace ktx_variant_{index}$",
        tuned,
        re.M | re.S,
    )
    assert m is not None, f"no namespace ktx_variant_{index} in the patched file"
    body = re.sub(r"^([ \t]*)// ktx: (#.*) is included above$", r"\1\2", m.group(1), flags=re.M)
    for name in functions:
        body = re.sub(rf"\b{re.escape(name)}_ktx{index}\b", name, body)
    return body


def export_block(cu: str, namespace: str) -> str:
    """A variant as ``kernels.cu`` of the torch export holds it (its includes were hoisted)."""
    m = re.search(rf"^namespace {namespace} \{{\n(.*)\n\}}  // namespace {namespace}$", cu, re.M | re.S)
    assert m is not None, f"no namespace {namespace} in kernels.cu"
    return m.group(1)


def check_shipped(spec: Spec, template: Template, configs: list[Mapping[str, int]]) -> int:
    """Every shipped form of each config equals the harness's instantiation; returns how many
    configs were compared."""
    tunable = Tunable.from_template(spec, template)
    original = spec.source_text()
    functions = global_functions(original)[0]
    measured: list[Candidate] = []
    for config in configs:
        full = template.space.complete(dict(config))
        harness = tunable.candidate(full)
        shipped = candidate_from_template(spec, template, full)
        assert shipped.source == harness.source, f"{spec.name} {full}: the seam differs from the harness"
        assert template.instantiate(full) == harness.source, f"{spec.name} {full}: ktx apply --config"
        assert (shipped.grid, shipped.block, shipped.shared) == (harness.grid, harness.block, harness.shared)
        measured.append(harness)
    files = [
        VARIANT_HEADER + ",".join(f"{k}={v}" for k, v in c.config.items()) + "\n" + c.source for c in measured
    ]
    tuned, _ = tuned_source(original, tuple(files), None, "dispatch.h")
    assert tuned is not None
    for i, (text, cand) in enumerate(zip(files, measured, strict=True)):
        assert patch_block(tuned, i, functions) == text.rstrip("\n"), f"{spec.name} variant {i}: the patch"
        assert without_knob_line(text) == cand.source
    if all("{" not in c.name_expression for c in measured):
        from ktx.pipeline import candidate

        variants = [Variant("ktx_original", candidate(spec, "", {}))]
        variants += [Variant(f"ktx_v{i}", c) for i, c in enumerate(measured)]
        cu = cuda_source(spec, variants)
        for i, cand in enumerate(measured):
            assert export_block(cu, f"ktx_v{i}") == _INCLUDE.sub("", cand.source), f"{spec.name} v{i}: export"
    return len(measured)


def configs_of(template: Template, count: int = 2) -> list[Mapping[str, int]]:
    """The defaults and a few sampled configs, distinct."""
    seen: list[Mapping[str, int]] = [template.space.complete({})]
    for seed in range(8 * count):
        config = template.space.complete(template.space.sample(seed))
        if config not in seen:
            seen.append(config)
        if len(seen) > count:
            break
    return seen


def templates(spec: Spec) -> Iterator[Template]:
    for passes in PASSES:
        template = template_for_spec(spec, passes)
        if template.knobs:
            yield template


SUITE = sorted(p.parent for p in (ROOT / "kernels").glob("*/ktx.toml"))


@pytest.mark.parametrize("folder", SUITE, ids=[p.name for p in SUITE])
def test_suite_kernels_ship_what_the_harness_compiles(folder: Path) -> None:
    spec = load_spec(folder)
    compared = sum(check_shipped(spec, t, configs_of(t)) for t in templates(spec))
    assert compared >= 2, f"{spec.name}: no pass gave knobs to compare"


def _llmc_run() -> ModuleType:
    path = ROOT / "benchmarks" / "llmc" / "run.py"
    loaded = importlib.util.spec_from_file_location("llmc_run_shipped", path)
    assert loaded is not None and loaded.loader is not None
    module = importlib.util.module_from_spec(loaded)
    sys.modules["llmc_run_shipped"] = module
    loaded.loader.exec_module(module)
    return module


def _llmc_cuda() -> Path:
    for cand in (ROOT / "shared" / "llmc", ROOT.parent / "shared" / "llmc"):
        if (cand / "dev" / "cuda" / "common.h").is_file():
            return cand / "dev" / "cuda"
    pytest.skip("llm.c (shared/llmc) is not here")


LLMC_NAIVE = ("gelu_forward", "layernorm_forward", "softmax_forward", "encoder_forward")


@pytest.mark.parametrize("name", LLMC_NAIVE)
def test_llmc_naive_kernels_ship_what_the_harness_compiles(name: str, tmp_path: Path) -> None:
    cuda = _llmc_cuda()
    run = _llmc_run()
    (lad,) = [lad for lad in run.LADDERS if lad.name == name]
    spec = load_spec(run.stage(lad, lad.naive, cuda, tmp_path))
    compared = sum(check_shipped(spec, t, configs_of(t)) for t in templates(spec))
    assert compared >= 2, f"{spec.name}: no pass gave knobs to compare"


@pytest.fixture
def replayed_run(replayed_optimize: Path) -> Path:
    """An optimize run replayed from the committed H200 recording, reported and exported
    (tests/conftest.py, shared with tests/commands/test_export.py)."""
    return replayed_optimize


def test_a_run_ships_what_it_measured(replayed_run: Path) -> None:
    """The run's variant files, its patch, its dispatch header and its export, against the
    harness's instantiation of each dispatched config."""
    state = json.loads((replayed_run / "optimize.json").read_text())
    spec = load_spec(SILU)
    template = template_for_spec(spec, state["pipeline"])
    tunable = Tunable.from_template(spec, template)
    table = json.loads((replayed_run / "final" / "dispatch.json").read_text())
    assert table["variants"], "the replayed run dispatches no variant: nothing to compare"
    header = (replayed_run / "final" / "dispatch.h").read_text()
    patched = tuned_source(
        spec.source_text(),
        tuple(p.read_text() for p in sorted((replayed_run / "final" / "best").glob("variant_*.cu"))),
        table,
        "dispatch.h",
    )[0]
    assert patched is not None
    diff = (replayed_run / "report" / "ktx.patch").read_text()
    cu = (replayed_run / "torch" / "kernels.cu").read_text()
    functions = global_functions(spec.source_text())[0]
    for i, config in enumerate(table["variants"]):
        full = {**table["defaults"], **config}
        harness = tunable.candidate(full)
        recorded = (replayed_run / "final" / "best" / f"variant_{i}.cu").read_text()
        assert without_knob_line(recorded) == harness.source
        assert patch_block(patched, i, functions) == recorded.rstrip("\n")
        # ktx.patch adds the patched file's lines, that block among them
        raw = patched.split(f"namespace ktx_variant_{i} {{\n", 1)[1].split(
            f"\n}}  // namespace ktx_variant_{i}"
        )[0]
        added = "".join(line[1:] for line in diff.splitlines(keepends=True) if line.startswith("+"))
        assert raw in added
        assert export_block(cu, f"ktx_v{i}") == _INCLUDE.sub("", harness.source)
        values = ", ".join(str(harness.config[k]) for k in table["knobs"])
        assert f"return {{{i}, {values}}};" in header, f"dispatch.h does not return variant {i} as measured"


def test_export_refuses_a_run_whose_source_changed(replayed_run: Path, tmp_path: Path) -> None:
    """A variant file that is not what the current source instantiates (the kernel was edited
    after the run) is not exported under the run's name."""
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(replayed_run, copy)
    variant = copy / "final" / "best" / "variant_0.cu"
    variant.write_text(variant.read_text().replace("{", "{ ", 1))
    assert main(["export", str(copy), "--torch", "-o", str(tmp_path / "out")]) == 2
