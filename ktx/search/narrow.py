"""How narrow a shape's optimum is, read from what its search measured.

At some shapes the best config is a needle: on act_and_mul_scalar at tokens=16 (H200, the
exhaustive recording) 2 of 2,304 configs lie within 2% of the optimum and every config one knob
away from it is at least 16% slower. No sampler finds such a point reliably in a small budget
(random sampling needs about 800 evaluations in the median), and a model that generalises from
neighbours is misled by them. What a tune can do is say so: the summary names each shape whose
best measured config stands alone, so that a reader knows the number rests on one point and that
a longer search, or a re-measure of the few best, is what would firm it up.

>>> n = Narrowness("s", 1.0, within=1, neighbours=3, nearest_slowdown=0.16)
>>> n.needle
True
>>> print(n.sentence().replace(", and", ",\\n and"))
s: a narrow optimum: 1 measured config within 2% of the best,
 and its 3 measured one-knob neighbours are 16% slower or more
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import optuna
from optuna.trial import TrialState

from ktx.measure.types import config_key
from ktx.search.space import Space

#: A best config is a needle when at most NEEDLE_WITHIN measured configs lie within the tolerance
#: of it (itself included) and at least NEEDLE_NEIGHBOURS of its one-knob neighbours were measured,
#: the fastest of them NEEDLE_SLOWDOWN slower or more.
NEEDLE_WITHIN = 2
NEEDLE_NEIGHBOURS = 2
NEEDLE_SLOWDOWN = 0.10


@dataclass(frozen=True)
class Narrowness:
    shape: str
    best_us: float
    within: int  # measured configs within the tolerance of the best, the best included
    neighbours: int  # measured configs that differ from the best in exactly one knob
    nearest_slowdown: float | None  # fastest such neighbour's time / best - 1 (None: none measured)
    tolerance: float = 0.02

    @property
    def needle(self) -> bool:
        return (
            self.within <= NEEDLE_WITHIN
            and self.neighbours >= NEEDLE_NEIGHBOURS
            and self.nearest_slowdown is not None
            and self.nearest_slowdown >= NEEDLE_SLOWDOWN
        )

    def sentence(self) -> str:
        configs = "config" if self.within == 1 else "configs"
        head = (
            f"{self.shape}: a narrow optimum: {self.within} measured {configs} "
            f"within {self.tolerance:.0%} of the best"
        )
        if self.nearest_slowdown is None:
            return head
        return (
            f"{head}, and its {self.neighbours} measured one-knob neighbours are "
            f"{self.nearest_slowdown:.0%} slower or more"
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "within": self.within,
            "neighbours": self.neighbours,
            "nearest_slowdown": self.nearest_slowdown,
            "tolerance": self.tolerance,
            "needle": self.needle,
        }


def narrowness(
    times: Mapping[str, tuple[Mapping[str, int], float]], space: Space, shape: str, tolerance: float = 0.02
) -> Narrowness | None:
    """From measured (config, time) by key: the best's company within ``tolerance`` and its
    measured one-knob neighbours (None when nothing was measured)."""
    if not times:
        return None
    best_key = min(times, key=lambda k: times[k][1])
    best_config, best = times[best_key]
    within = sum(1 for _, t in times.values() if t <= best * (1.0 + tolerance))
    slowdowns: list[float] = []
    for key, (config, t) in times.items():
        if key == best_key:
            continue
        differ = [
            k.name
            for k in space.knobs
            if int(config.get(k.name, k.default)) != int(best_config.get(k.name, k.default))
        ]
        if len(differ) == 1:
            slowdowns.append(t / best - 1.0)
    return Narrowness(shape, best, within, len(slowdowns), min(slowdowns) if slowdowns else None, tolerance)


def study_times(study: optuna.Study, space: Space) -> dict[str, tuple[dict[str, int], float]]:
    """Each measured config's best time in a study (complete trials with the engine's record)."""
    out: dict[str, tuple[dict[str, int], float]] = {}
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        info = t.user_attrs.get("ktx")
        if not isinstance(info, dict) or t.value is None or not math.isfinite(t.value):
            continue
        config = space.normalize(info.get("config", {}))
        key = config_key(config)
        if key not in out or t.value < out[key][1]:
            out[key] = (config, float(t.value))
    return out


def study_narrowness(
    study: optuna.Study, space: Space, shape: str, tolerance: float = 0.02
) -> Narrowness | None:
    return narrowness(study_times(study, space), space, shape, tolerance)
