"""scripts/s11_ladder_replay.py on the real llm.c kernels (read in place from shared/llmc):
round 1's plan from their facts and probes holds the companions the configs faster than the
hand kernels need, and its first steps are those configs' region; the sleeping model of the
ladder's GPU gives softmax more than the one round session 10's call 4 had."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from ktx.measure.types import Measurement, Resources, Status, Timing

ROOT = Path(__file__).resolve().parents[2]

#: every test builds the templates of every pass's probe on a real llm.c kernel: 3-10 s each
pytestmark = pytest.mark.slow


def _load() -> ModuleType:
    path = ROOT / "scripts" / "s11_ladder_replay.py"
    spec = importlib.util.spec_from_file_location("s11_ladder_replay", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["s11_ladder_replay"] = module
    spec.loader.exec_module(module)
    return module


def _llmc() -> Path:
    for cand in (ROOT / "shared" / "llmc", ROOT.parent / "shared" / "llmc"):
        if (cand / "dev" / "cuda" / "common.h").is_file():
            return cand
    pytest.skip("llm.c (shared/llmc) is not here")


#: (shape, naive µs per launch, bytes) as session 9's ladder measured the naive kernels (H200)
NAIVE = {
    "softmax_forward": (("B=8,T=1024,C=768", 740.2, 50331648), ("B=1,T=1024,C=50257", 39899.1, 411705344),
                        ("B=8,T=1024,C=50257", 41417.0, 3293642752)),
    "layernorm_forward": (("B=1,T=1024,C=768", 574.3, 6305792), ("B=8,T=1024,C=768", 581.0, 50403328),
                          ("B=32,T=1024,C=768", 662.1, 201594880)),
    "fused_residual_forward": (("B=1,T=1024,C=768", 1085.6, 6298624), ("B=8,T=1024,C=768", 1101.6, 50367488),
                               ("B=32,T=1024,C=768", 1106.3, 201460736)),
    "encoder_forward": (("B=1,T=1024,C=768", 548.8, 4722688), ("B=8,T=1024,C=768", 563.3, 37781504),
                        ("B=32,T=1024,C=768", 562.0, 151126016)),
}  # fmt: skip


def _original(shape: str, us: float, nbytes: int, config: dict[str, int] | None = None) -> Measurement:
    t = Timing(us, us * 0.99, us * 1.01, us * 0.98, us * 1.05, us, 20)
    rows = 1024 * int(shape.split(",")[0].split("=")[1])
    return Measurement(
        kernel="k", shape=shape, config=config or {}, status=Status.OK, single=t, graph=t,
        resources=Resources(32, 0, 0, 0, 1024, 256, 8, 1.0, "warps"), grid=(rows // 256,), block=(256,),
        bytes=nbytes, bandwidth_gbs=nbytes / us / 1e3, sol_us=nbytes / 4.19e6,
        sol_fraction=nbytes / 4.19e6 / us,
    )  # fmt: skip


def _originals(kernel: str) -> dict[str, Measurement]:
    return {shape: _original(shape, us, nbytes) for shape, us, nbytes in NAIVE[kernel]}


@pytest.fixture(scope="module")
def staged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    mod = _load()
    root = tmp_path_factory.mktemp("stage")
    return {k: mod.stage(k, _llmc(), root) for k in NAIVE}


def test_softmax_round_one_holds_online_and_vectorize_with_row_owner(staged: dict[str, Path]) -> None:
    """Session 10: the configs at 0.77x of online8 (8x768) and 0.93x of v7 (1x50257) are
    ``row-owner,online,vectorize``; call 4's ladder run had time for one round, ``row-owner,
    online``. From the facts (row loops folding a max and a sum of exp, read element by element),
    round 1 now holds all three, and its first steps are those configs' region."""
    first = _load().first_round(staged["softmax_forward"], _originals("softmax_forward"))
    assert first.plan.names == ("row-owner", "online", "vectorize"), first.plan.rationale
    assert "with vectorize in the same round" in first.plan.rationale
    knobs = dict(first.knobs)
    assert knobs["ONLINE"] == (0, 1) and knobs["VEC_LOOPS"] == (1, 2, 4)
    narrow, wide = first.first["B=8,T=1024,C=768"], first.first["B=1,T=1024,C=50257"]
    assert narrow[0] == {"THREADS_PER_ROW": 32, "ROW_BLOCK": 0, "ONLINE": 1, "VEC_LOOPS": 4}
    assert wide[0] == {"THREADS_PER_ROW": 1024, "ROW_BLOCK": 0, "ONLINE": 1, "VEC_LOOPS": 4}


@pytest.mark.parametrize("kernel", ["layernorm_forward", "fused_residual_forward"])
def test_a_mean_variance_pair_gets_the_packable_online_form(staged: dict[str, Path], kernel: str) -> None:
    """Session 10: ONLINE=2 (the Σx, Σx² pair) with vectorize gave layernorm 0.89/0.90 of the
    hand kernels at B=8/32 and fused_residual 0.51-0.75 of Welford. Round 1 offers exactly that
    form beside row-owner alone (ONLINE 0), not Welford's shift, which vectorize refuses."""
    first = _load().first_round(staged[kernel], _originals(kernel))
    assert first.plan.names == ("row-owner", "online", "vectorize"), first.plan.rationale
    knobs = dict(first.knobs)
    assert knobs["ONLINE"] == (0, 2)
    widest = max(knobs["VEC_LOOPS"])
    for steps in first.first.values():
        lead = steps[0]
        assert (lead["THREADS_PER_ROW"], lead["ONLINE"], lead["VEC_LOOPS"]) == (32, 2, widest)


def test_a_row_copy_without_a_reduction_gets_vectorize_alone(staged: dict[str, Path]) -> None:
    """encoder v1 (session 9: row-owner in round 1, +vectorize 25 -> 36x in round 2): no pair to
    fuse, the owned row loop packs: both in round 1."""
    first = _load().first_round(staged["encoder_forward"], _originals("encoder_forward"))
    assert first.plan.names == ("row-owner", "vectorize"), first.plan.rationale
    assert "online" not in first.plan.rationale.split("(passed over")[0]


def _recording(folder: Path, kernel: str, anchors: list[tuple[str, dict[str, int], float]]) -> None:
    ms = [m.to_dict() for m in _originals(kernel).values()]
    nbytes = {shape: b for shape, _, b in NAIVE[kernel]}
    ms += [_original(shape, us, nbytes[shape], config).to_dict() for shape, config, us in anchors]
    (folder / kernel).mkdir(parents=True)
    (folder / kernel / "recording.json").write_text(json.dumps({"measurements": ms}))


def test_softmax_on_the_sleeping_model_runs_the_bundle_first_then_more(staged: dict[str, Path],
                                                                      tmp_path: Path) -> None:  # fmt: skip
    """``ktx optimize`` on the sleeping model at softmax's share of ``--budget 470`` on 3 GPUs
    (218 s): round 1 is the bundle, its first evaluations at each shape are the companions-on
    steps, a second round runs (call 4 had one), every win is checked, the run ends in budget."""
    mod = _load()
    anchors = [("B=8,T=1024,C=768", {"THREADS_PER_ROW": 32, "ONLINE": 1}, 27.6),
               ("B=1,T=1024,C=50257", {"THREADS_PER_ROW": 1024, "ONLINE": 1}, 234.5),
               ("B=8,T=1024,C=50257", {"THREADS_PER_ROW": 256, "ONLINE": 1}, 1972.6)]  # fmt: skip
    _recording(tmp_path / "rec", "softmax_forward", anchors)
    originals, found = mod.load_anchors([tmp_path / "rec"], "softmax_forward")
    budget = mod.share_s("softmax_forward", 470.0, 3, [e.name for e in mod._ladder().LADDERS])
    assert 200.0 < budget < 240.0
    run = tmp_path / "run"
    out: dict[str, Any] = mod.replay(staged["softmax_forward"], run, budget, originals, found, "softmax")
    rounds = out["rounds"]
    assert rounds[0]["pipeline"].startswith("row-owner,online,vectorize"), rounds[0]
    assert len(rounds) >= 2, out["notes"]
    assert out["wall_s"] <= budget * 1.05 + 1.0
    import optuna

    from ktx.search.study import default_url, open_storage

    storage = open_storage(default_url(run / "round-01"))
    seen = 0
    for summary in optuna.get_all_study_summaries(storage):
        trials = optuna.load_study(study_name=summary.study_name, storage=storage).trials
        assert trials and trials[0].user_attrs.get("bundle_step"), summary.study_name
        seen += 1
    assert seen == 3
