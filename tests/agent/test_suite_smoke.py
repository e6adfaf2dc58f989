"""Every suite kernel through the loop on a CPU (modelled times): probes, templates, instantiation
of every searched config, launch mappings, the dispatch table and the report's inputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ktx.ir.errors import KtxError

from ktx.agent.loop import OptimizeRequest, load_records, optimize
from ktx.pipeline import template_for_spec
from ktx.registry import default_registry
from ktx.spec import Spec, find_specs
from ktx.specload import load_spec

from .model_backend import GenericBackend

ROOT = Path(__file__).resolve().parents[2]
KERNELS = sorted(p.name for p in find_specs(ROOT / "kernels"))


def applicable_passes(spec: Spec) -> list[str]:
    """The registered passes that give this kernel knobs or change its source on their own."""
    found = []
    for name in default_registry().names():
        try:
            t = template_for_spec(spec, name)
        except KtxError:
            continue
        if t.knobs or t.source != spec.source_text():
            found.append(name)
    return found


@pytest.mark.parametrize("kernel", KERNELS)
def test_suite_kernel_through_the_loop(kernel: str, tmp_path: Path) -> None:
    spec = load_spec(ROOT / "kernels" / kernel)
    shapes = ("quick",) if any(s.name == "quick" for s in spec.shapes) else ()
    req = OptimizeRequest(
        ROOT / "kernels" / kernel, rounds=2, trials_per_round=3, out=tmp_path, shapes=shapes, ncu="off"
    )
    result = optimize(req, backend=GenericBackend(spec))
    rounds = load_records(tmp_path)
    assert rounds, "no round ran"
    for r in rounds:
        assert r["status"] in ("improved", "no-gain", "template-failed", "stopped"), r["note"]
        if r["status"] in ("improved", "no-gain"):
            assert r["result"]["evaluations"] > 0
    if applicable_passes(spec):
        # Rounds that all failed to template (or stopped before searching) would pass the checks
        # above while the loop did nothing: some pass applies, so some round must be searched.
        searched = [r for r in rounds if r["status"] in ("improved", "no-gain")]
        assert searched, [(r["pipeline"], r["status"], r["note"]) for r in rounds]
    state = json.loads((tmp_path / "optimize.json").read_text())
    assert state["state"] == "done" and state["kernel"] == spec.name
    assert result.best_round == 0 or (tmp_path / "final" / "dispatch.h").exists()
