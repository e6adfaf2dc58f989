"""The knob space as the search sees it, and its mapping onto Optuna distributions.

A template's knobs are finite sets of integers (block sizes, vector widths, unroll factors, 0/1
switches). Optuna's samplers learn more from an ordered integer than from an unordered category
(TPE's Parzen estimator, CMA-ES and the GP all use distances), so each knob becomes an
``IntDistribution`` that keeps the order of its values:

* an arithmetic progression ``1, 2, 3`` or ``0, 1`` is suggested directly, under the knob's name;
* powers of two ``32 .. 1024`` are suggested as their exponent, under ``log2(NAME)``, so that
  128 lies as far from 256 as 256 from 512;
* anything else is suggested as an index into the sorted values, under ``NAME[i]``.

A knob may carry a *condition* over earlier knobs (the knobs of a pass are only meaningful when
that pass is switched on). An inactive knob is not suggested at all, which keeps TPE's model of
it clean, and takes its default so that the template can still be instantiated.

Constraints are :class:`~ktx.ir.expr.Expr` predicates over knobs and shape variables; they are
checked before anything is compiled (:meth:`Space.violations`).

>>> space = Space((Knob("BLOCK", (64, 128, 256), 128), Knob("VEC", (1, 2, 4, 8), 8)),
...               (Expr.parse("d % (VEC * BLOCK) == 0"),))
>>> [space.param_name(k) for k in space.knobs]
['log2(BLOCK)', 'log2(VEC)']
>>> space.size(), space.violations({"BLOCK": 256, "VEC": 8}, {"d": 1024})
(12, ('d % (VEC * BLOCK) == 0',))
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import optuna
from ktx.ir.errors import KtxError
from ktx.ir.expr import Expr, Value

from ktx.measure.types import config_key

Config = Mapping[str, int]

#: Largest space :meth:`Space.configs` enumerates; past it the space counts as unbounded.
ENUMERATION_LIMIT = 20_000


@dataclass(frozen=True)
class Knob:
    """One knob: its name (a C identifier), the values it may take, its default.

    ``condition`` (over knobs declared before this one) says when the knob matters; ``owner``
    names the pass that exposed it (for reports).
    """

    name: str
    values: tuple[int, ...]
    default: int
    condition: Expr | None = None
    owner: str = ""

    def __post_init__(self) -> None:
        if not self.values:
            raise KtxError(f"knob {self.name!r} has no values")
        if self.default not in self.values:
            raise KtxError(f"knob {self.name!r}: default {self.default} is not one of {list(self.values)}")
        ordered = tuple(sorted(set(int(v) for v in self.values)))
        object.__setattr__(self, "values", ordered)


def knob_from(obj: Any) -> Knob:
    """Adapt a template's knob: ``values`` or ``domain``, optional ``condition``/``when``/``owner``."""
    if isinstance(obj, Knob):
        return obj
    values = getattr(obj, "values", None)
    if values is None or callable(values):
        values = getattr(obj, "domain", None)
    if values is None:
        raise KtxError(f"knob {getattr(obj, 'name', obj)!r} has no values or domain")
    condition = getattr(obj, "condition", None) or getattr(obj, "when", None)
    if isinstance(condition, str):
        condition = Expr.parse(condition)
    owner = getattr(obj, "owner", None) or getattr(obj, "pass_name", None) or ""
    return Knob(str(obj.name), tuple(int(v) for v in values), int(obj.default), condition, str(owner))


def _kind(values: tuple[int, ...]) -> str:
    if len(values) <= 2 or len({b - a for a, b in itertools.pairwise(values)}) == 1:
        return "linear"
    # consecutive powers of two only: an exponent range with gaps ({1, 32, 64, ...}) would
    # suggest the missing ones (16), which are not in the domain
    doubling = all(b == 2 * a for a, b in itertools.pairwise(values))
    if values[0] > 0 and values[0] & (values[0] - 1) == 0 and doubling:
        return "log2"
    return "index"


@dataclass(frozen=True)
class Space:
    """Knobs in suggestion order, plus the constraints every measured config must satisfy."""

    knobs: tuple[Knob, ...] = ()
    constraints: tuple[Expr, ...] = ()
    _by_name: Mapping[str, Knob] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        seen: dict[str, Knob] = {}
        for knob in self.knobs:
            if knob.name in seen:
                raise KtxError(f"knob {knob.name!r} is declared twice")
            if knob.condition is not None:
                later = sorted(knob.condition.names - set(seen))
                if later:
                    raise KtxError(
                        f"knob {knob.name!r}: condition {knob.condition.text!r} names {later[0]!r}, "
                        "which is not an earlier knob"
                    )
            seen[knob.name] = knob
        object.__setattr__(self, "_by_name", seen)

    # -- the Optuna side ----------------------------------------------------------------------

    def param_name(self, knob: Knob) -> str:
        kind = _kind(knob.values)
        return (
            knob.name if kind == "linear" else f"log2({knob.name})" if kind == "log2" else f"{knob.name}[i]"
        )

    def distribution(self, knob: Knob) -> optuna.distributions.IntDistribution:
        values = knob.values
        kind = _kind(values)
        if kind == "linear":
            step = values[1] - values[0] if len(values) > 1 else 1
            return optuna.distributions.IntDistribution(values[0], values[-1], step=step)
        if kind == "log2":
            return optuna.distributions.IntDistribution(
                values[0].bit_length() - 1, values[-1].bit_length() - 1
            )
        return optuna.distributions.IntDistribution(0, len(values) - 1)

    def _decode(self, knob: Knob, raw: int) -> int:
        kind = _kind(knob.values)
        if kind == "linear":
            return int(raw)
        if kind == "log2":
            return 1 << int(raw)
        return knob.values[int(raw)]

    def _encode(self, knob: Knob, value: int) -> int:
        kind = _kind(knob.values)
        if value not in knob.values:
            raise KtxError(f"knob {knob.name!r}: {value} is not one of {list(knob.values)}")
        if kind == "linear":
            return value
        if kind == "log2":
            return value.bit_length() - 1
        return knob.values.index(value)

    def active(self, knob: Knob, config: Mapping[str, int]) -> bool:
        return knob.condition is None or knob.condition.evaluate_bool(dict(config))

    def suggest(self, trial: optuna.trial.BaseTrial) -> dict[str, int]:
        """Define-by-run: suggest each active knob; inactive ones and single values take defaults."""
        config: dict[str, int] = {}
        for knob in self.knobs:
            if len(knob.values) == 1 or not self.active(knob, config):
                config[knob.name] = knob.default
                continue
            dist = self.distribution(knob)
            raw = trial.suggest_int(self.param_name(knob), dist.low, dist.high, step=dist.step)
            config[knob.name] = self._decode(knob, raw)
        return config

    def to_params(self, config: Config) -> dict[str, int]:
        """Optuna params for ``config`` (for ``enqueue_trial``): only the knobs that are suggested."""
        params: dict[str, int] = {}
        seen: dict[str, int] = {}
        for knob in self.knobs:
            value = int(config.get(knob.name, knob.default))
            if len(knob.values) > 1 and self.active(knob, seen):
                params[self.param_name(knob)] = self._encode(knob, value)
            else:
                value = knob.default
            seen[knob.name] = value
        return params

    def from_params(self, params: Mapping[str, Any]) -> dict[str, int]:
        """The config a finished trial's params stand for (inactive knobs at their defaults)."""
        config: dict[str, int] = {}
        for knob in self.knobs:
            name = self.param_name(knob)
            if name in params and len(knob.values) > 1 and self.active(knob, config):
                config[knob.name] = self._decode(knob, int(params[name]))
            else:
                config[knob.name] = knob.default
        return config

    # -- the space itself ----------------------------------------------------------------------

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(k.name for k in self.knobs)

    def default(self) -> dict[str, int]:
        return self.normalize({k.name: k.default for k in self.knobs})

    def normalize(self, config: Config) -> dict[str, int]:
        """Inactive knobs set to their defaults, so that equal kernels have equal configs."""
        return self.from_params(self.to_params(config))

    def configs(self, limit: int = ENUMERATION_LIMIT) -> Iterator[dict[str, int]]:
        """Every distinct config (inactive knobs at defaults); stops after ``limit``."""
        seen: set[str] = set()
        for combo in itertools.product(*(k.values for k in self.knobs)):
            config = self.normalize(dict(zip(self.names, combo, strict=True)))
            key = config_key(config)
            if key in seen:
                continue
            seen.add(key)
            yield config
            if len(seen) >= limit:
                return

    def size(self, limit: int = ENUMERATION_LIMIT) -> int | None:
        """Number of distinct configs, or None when larger than ``limit``."""
        product = 1
        for knob in self.knobs:
            product *= len(knob.values)
        if all(k.condition is None for k in self.knobs):
            return product if product <= limit else None
        if product > 4 * limit:
            return None
        count = sum(1 for _ in self.configs(limit + 1))
        return count if count <= limit else None

    def violations(self, config: Config, env: Mapping[str, Value]) -> tuple[str, ...]:
        """The constraint texts ``config`` breaks at shape ``env`` (empty when feasible).

        As in :class:`ktx.template.KnobSpace`, a constraint naming something neither a knob nor
        a shape variable is left to the harness rather than guessed at.
        """
        full: dict[str, Value] = {**env, **config}
        return tuple(
            c.text.strip() for c in self.constraints if c.names <= full.keys() and not c.evaluate_bool(full)
        )

    def feasible_configs(
        self, env: Mapping[str, Value], limit: int = ENUMERATION_LIMIT
    ) -> list[dict[str, int]]:
        return [c for c in self.configs(limit) if not self.violations(c, env)]

    def describe(self) -> list[dict[str, Any]]:
        """JSON-ready knob list (run logs, recordings)."""
        return [
            {
                "name": k.name,
                "values": list(k.values),
                "default": k.default,
                **({"condition": k.condition.text} if k.condition is not None else {}),
                **({"owner": k.owner} if k.owner else {}),
            }
            for k in self.knobs
        ]

    @classmethod
    def from_description(cls, knobs: Sequence[Mapping[str, Any]], constraints: Sequence[str] = ()) -> Space:
        return cls(
            tuple(
                Knob(
                    str(k["name"]),
                    tuple(int(v) for v in k["values"]),
                    int(k["default"]),
                    Expr.parse(k["condition"]) if k.get("condition") else None,
                    str(k.get("owner", "")),
                )
                for k in knobs
            ),
            tuple(Expr.parse(c) for c in constraints),
        )
