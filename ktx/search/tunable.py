"""What the search tunes: a knob space and the candidate each config stands for.

Three things can be tuned, and the search does not care which:

* the original kernel with no passes (an empty space: only the baseline is measured);
* a pass-framework template (``ktx.template.Template``): its knobs and constraints, its
  ``instantiate(config)`` source and its launch mapping;
* a recording's own space (replay without a pass pipeline): the recording answers by config, so
  the candidate's source is only a label.

>>> t = Tunable.recorded("k", Space(), "fp")
>>> t.candidate({}).label
'original'
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ktx.ir.errors import KtxError
from ktx.ir.expr import Expr

from ktx.measure.replay import REPLAYED
from ktx.measure.types import Candidate, config_key, original_candidate
from ktx.search.space import Config, Space, knob_from
from ktx.spec import ShapePoint, Spec


class TemplateLike(Protocol):
    """The part of :class:`ktx.template.Template` the search uses."""

    @property
    def space(self) -> Any: ...

    @property
    def pipeline(self) -> str: ...

    def candidate_fields(self, config: Mapping[str, int] | None = None) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Tunable:
    """A space plus ``make(config) -> Candidate``; ``make({})`` is the original kernel."""

    kernel: str
    pipeline: str
    space: Space
    make: Callable[[Config], Candidate]
    fingerprint: str  # identifies the space and the templates: part of the study name
    #: (grid, block) of a config at a shape where ``make``'s candidate cannot say (a recording's
    #: candidates carry no launch mapping, only labels): the cost model's launch features.
    launch_hint: Callable[[Config, str], tuple[tuple[int, ...], tuple[int, ...]] | None] | None = None

    def candidate(self, config: Config) -> Candidate:
        return self.make(config)

    @property
    def study_tag(self) -> str:
        return self.fingerprint[:10]

    # -- constructors ----------------------------------------------------------------------

    @classmethod
    def original(cls, spec: Spec) -> Tunable:
        base = original_candidate(spec)

        def make(config: Config) -> Candidate:
            if config:
                raise KtxError("the original kernel has no knobs", hint="give --passes to expose some")
            return base

        return cls(spec.name, "", Space(), make, _digest({"source": base.source, "spec": spec_context(spec)}))

    @classmethod
    def recorded(
        cls,
        kernel: str,
        space: Space,
        recording_digest: str,
        launches: Mapping[tuple[str, str], tuple[tuple[int, ...], tuple[int, ...]]] | None = None,
    ) -> Tunable:
        """``launches``: (shape name, config key) -> (grid, block) as the recording saw them. The
        launch is set by the template's mapping before anything is compiled, so the cost model
        may use it for configs not yet replayed, as it uses the template's own mapping on a GPU."""

        def make(config: Config) -> Candidate:
            label = "original" if not config else "recorded"
            return Candidate(
                source=f"{REPLAYED} {recording_digest}",
                name_expression=kernel,
                grid=("1",),
                block=("1",),
                config={k: int(v) for k, v in config.items()},
                label=label,
            )

        hint = None
        if launches:
            table = dict(launches)

            def hint(config: Config, shape: str) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
                return table.get((shape, config_key(config)))

        return cls(
            kernel,
            "recording",
            space,
            make,
            _digest({"recording": recording_digest, "space": space.describe()}),
            hint,
        )

    @classmethod
    def from_template(cls, spec: Spec, template: TemplateLike) -> Tunable:
        """Adapt a pass-framework template: its knob space and ``candidate_fields(config)``."""
        space = Space(
            tuple(knob_from(k) for k in template.space.knobs),
            tuple(Expr.parse(c) for c in template.space.constraints),
        )
        base = original_candidate(spec)

        def make(config: Config) -> Candidate:
            if not config:
                return base
            fields = template.candidate_fields(dict(config))
            return Candidate(**fields, flags=base.flags, label=template.pipeline)

        fields = template.candidate_fields(space.default())
        grid_exprs = tuple(Expr.parse(g) for g in fields["grid"])
        block_exprs = tuple(Expr.parse(b) for b in fields["block"])

        def hint(config: Config, shape: str) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
            """The template's launch mapping (one set of expressions over knobs and shape
            variables for every config), evaluated without instantiating the source; parsed
            once, since the cost model asks it of every config of a shape."""
            env = spec.env(ShapePoint.from_name(shape), config)
            return tuple(e.evaluate_int(env) for e in grid_exprs), tuple(
                e.evaluate_int(env) for e in block_exprs
            )

        return cls(
            spec.name,
            template.pipeline,
            space,
            make,
            _digest(
                {
                    "pipeline": template.pipeline,
                    "space": space.describe(),
                    "default": fields,
                    "spec": spec_context(spec),
                }
            ),
            hint,
        )


def spec_context(spec: Spec) -> dict[str, Any]:
    """What the spec adds to a measurement besides the candidate: how it is verified (tolerances,
    reference, rounds, seed, odd shapes), what it runs on (argument dtypes, shapes, value
    distributions) and how it is accounted (bytes, flops), plus the original's launch and flags.
    Part of every cache key and of the original's fingerprint: change one and nothing measured
    under the old one is reused."""
    reference: dict[str, Any] = {"use": spec.reference.use, "python": spec.reference.python}
    if spec.reference.python:
        module = spec.reference.python.split(":")[0].replace(".", "/") + ".py"
        path = spec.folder / module
        if path.is_file():
            reference["python_sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    return {
        "args": [
            {
                "name": a.name,
                "dtype": a.dtype.name,
                # a struct's field values (present only for one: other specs' keys stay as they were)
                **({"fields": [[n, str(e)] for n, e in a.fields], "type": a.ctype} if a.fields else {}),
                "role": str(a.role),
                "shape": [str(e) for e in a.shape],
                "value": None if a.value is None else str(a.value),
                "dist": [a.dist.kind, [list(kv) for kv in a.dist.params]]
                + ([[str(e) for e in a.dist.bounds]] if a.dist.bounds else []),  # int:LOW..HIGH
                # order-free comparison, pointer fields: present only where a spec has them
                **({"order": a.order} if a.order else {}),
                **({"pointers": [list(p) for p in a.pointers]} if a.pointers else {}),
            }
            for a in spec.all_args  # the [[buffers]] after the kernel's arguments
        ],
        **({"prelude_sha256": hashlib.sha256(spec.prelude.encode()).hexdigest()} if spec.prelude else {}),
        "derived": [[n, str(e)] for n, e in spec.derived],
        "tolerance": [[n, [t.rtol, t.atol, repr(t.max_abs), t.ulp]] for n, t in spec.tolerance],
        "reference": reference,
        "verify": [spec.verify.rounds, spec.verify.seed, [[v, list(o)] for v, o in spec.verify.odd]],
        "bytes": None if spec.bytes is None else str(spec.bytes),
        "flops": None if spec.flops is None else str(spec.flops),
        "launch": [
            [str(e) for e in spec.launch.grid],
            [str(e) for e in spec.launch.block],
            str(spec.launch.shared),
        ],
        "flags": list(spec.flags),
        "require": [str(e) for e in spec.require],
    }


def spec_digest(spec: Spec) -> str:
    return _digest(spec_context(spec))


def _digest(data: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def load_tunable(spec: Spec, pipeline: str) -> Tunable:
    """Run the pass pipeline on the spec's kernel (launched as the spec says), or take the
    original when the pipeline is empty."""
    if not pipeline.strip():
        return Tunable.original(spec)
    from ktx.pipeline import template_for_spec

    return Tunable.from_template(spec, template_for_spec(spec, pipeline))
