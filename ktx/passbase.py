"""The pass framework: what a pass declares, what it sees, and how it rewrites.

A pass turns a performance choice that a kernel makes implicitly into an explicit, named
knob with a domain, a default and constraints. It **never picks a value**: the search does.
A pass is a class whose metadata is data (checked by :func:`ktx.registry.check_pass` when it
is registered, in the style of MLIR's pass registry and libcst's codemods):

* ``name`` (kebab-case) and ``summary`` (one line);
* ``knobs``: :class:`KnobSpec` entries documenting the knobs it may create (a per-loop knob is
  declared once as ``UNROLL_<loop>`` and created per site as ``UNROLL_L3``);
* ``options``: typed :class:`Option` entries with defaults and help
  (``unroll{max=8,loops=L0|L2}``);
* ``phase``: a :class:`Phase`, what kind of change the pass makes; the planner tries passes
  phase by phase (ownership, then vector width, then block size, then unrolling, then hints);
* ``requires`` (added to the pipeline when missing), ``after`` (ordering only),
  ``prefer_after`` (ordering when it closes no cycle) and ``conflicts`` (a pipeline holding
  both fails): the order in which passes *run*, which is not the phase order (see
  :class:`Phase`).

Two methods do the work. :meth:`Pass.sites` looks at a :class:`Target` (the module, the kernel,
its launch mapping) and yields :class:`Site` objects or :class:`Skip` remarks (a skipped site is
something the user reads, not an error). :meth:`Pass.rewrite` gets one site and a
:class:`Rewriter`, through which it replaces byte ranges, declares knobs (getting back the
placeholder to write, ``KTX_UNROLL_L3``), adds constraints and updates the launch mapping. It
may raise :class:`Refuse` to give up on the site with a reason. Each site is a transaction:
its edits, knobs and mapping changes land together or not at all.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import ClassVar, Generic, Literal, TypeVar

from ktx.ir import Edit, Function, LaunchSite, Loop, Module, Span
from ktx.ir.errors import KtxError
from ktx.ir.expr import Expr
from ktx.ir.launch import LaunchMapping, substitute

from ktx.usercode import user_code

PASS_NAME = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")
KNOB_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")
OPTION_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")
_IDENT = re.compile(r"\b[A-Za-z_]\w*\b")

#: Helper macros a template may use besides its knobs (its header defines them).
HELPERS = ("KTX_PICK", "KTX_CDIV")

#: Knob placeholders in template source: ``KTX_<NAME>``.
MACRO_PREFIX = "KTX_"
#: Identifiers of the namespace-scope ``constexpr int`` that ``#pragma unroll`` reads (pragmas
#: do not expand macros): ``ktx_<NAME>``.
CONSTEXPR_PREFIX = "ktx_"

OptionKind = Literal["int", "bool", "str", "ints", "strs"]
OptionValue = int | bool | str | tuple[int, ...] | tuple[str, ...]


# -- declarations ------------------------------------------------------------------------------


class Phase(IntEnum):
    """What kind of change a pass makes, in the order the planner tries such changes.

    Changes that compose are tried first: who owns a row decides what a thread's loop is, the
    vector width decides how much each thread moves, the block size is best chosen for that
    work, unrolling for the final loops, and hints last. A new pass is placed in the planner by
    this one attribute (:func:`ktx.agent.rules.phases` groups the registered passes by it).

    The *run* order of a pipeline is a different fact, kept by ``after``/``prefer_after``, and
    it cannot be derived from phases without moving tested pipelines (issue 17 item 6, measured
    on the 124 pipelines of ``tests/pipeline_orders.tsv``). Run edges derived from an order of
    phases put an earlier phase first in *every* pipeline, while the hand-written edges leave
    many pairs in the order the user wrote, and tested pipelines rely on both orders of a pair:

    * ``split,vectorize`` runs ``vectorize,split`` (an H200 finding: split first left vectorize
      no contiguous loop), but ``split,rows-per-block,vectorize`` runs as written (hard edges
      split -> rows-per-block -> vectorize): split, rows-per-block and vectorize share a phase;
    * llm.c's ``vectorize,block-size`` keeps vectorize first, while its layernorm pipeline
      ``vectorize,block-size,unroll,rows-per-block`` runs ``block-size,unroll,rows-per-block,
      vectorize`` (8 knobs; unroll after vectorize gives 14): block-size, unroll and vectorize
      share a phase;
    * ``vectorize,row-owner`` (row-owner's refusal test) and ``row-owner,vectorize`` both run as
      written; ``unroll,tile,launch-bounds`` adds block-size after unroll, ``block-size,unroll``
      keeps it before.

    Closing these with the hard edges, the finest order of phases that keeps every tested order
    is expose | 14 passes | cluster-rows | early-loads: 41 of the 72 edges stay (all inside the
    14), and the planner would get one group of 14. The five phases below keep the planner's
    order instead; ``tests/test_pipeline_orders.py`` guards the run order.
    """

    OWNERSHIP = 0
    """Which threads own a row or a reduction: row-owner, warp-reduce, split, cluster-rows,
    rows-per-block."""
    VECTORIZE = 1
    """How wide each thread's accesses are and how many items it handles: vectorize, coarsen."""
    BLOCK = 2
    """The launch's block size: block-size."""
    UNROLL = 3
    """The shape of each thread's loops and where its loads sit: unroll, tile, early-loads,
    loads-first."""
    HINTS = 4
    """Hints and enablers that change no mapping: hoist, cache-hints, launch-bounds, expose,
    fast-math."""

    @property
    def label(self) -> str:
        """``ownership``, ``vectorize``, ... (docs and listings)."""
        return self.name.lower()


@dataclass(frozen=True)
class Option:
    """A typed pass option: ``kind`` is int, bool, str, ints or strs (lists written ``a|b|c``)."""

    name: str
    kind: OptionKind
    default: OptionValue
    help: str

    def parse(self, raw: str, pass_name: str) -> OptionValue:
        """The value of ``raw`` (pipeline text) for this option; a KtxError says what is wrong."""
        raw = raw.strip()

        def bad(what: str) -> KtxError:
            return KtxError(
                f"option {self.name!r} of pass {pass_name!r} expects {what}, got {raw!r}",
                None,
                f"{self.name}: {self.help}",
            )

        if self.kind == "int":
            try:
                return int(raw, 0)
            except ValueError:
                raise bad("an integer") from None
        if self.kind == "bool":
            lowered = raw.lower()
            if lowered in ("1", "true", "yes", "on"):
                return True
            if lowered in ("0", "false", "no", "off"):
                return False
            raise bad("true or false")
        if self.kind == "str":
            return raw
        items = tuple(x.strip() for x in raw.split("|") if x.strip())
        if not items:
            raise bad("a list written a|b|c")
        if self.kind == "ints":
            try:
                return tuple(int(x, 0) for x in items)
            except ValueError:
                raise bad("integers written 1|2|4") from None
        return items

    def format(self, value: OptionValue) -> str:
        """Pipeline text for ``value`` (the inverse of :meth:`parse`)."""
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, tuple):
            return "|".join(str(v) for v in value)
        return str(value)


@dataclass(frozen=True)
class KnobSpec:
    """Documentation of the knobs a pass creates: name pattern, domain and default, in words."""

    name: str
    domain: str
    default: str
    help: str


@dataclass(frozen=True)
class Knob:
    """One knob of a template: a name (a C identifier), its finite domain and its default.

    The default reproduces the original kernel. ``0`` is, by convention, "as the original
    does it" for knobs that replace a shape-dependent choice (block-size, unroll).

    >>> Knob("UNROLL_L0", (0, 1, 2, 4), 0).macro
    'KTX_UNROLL_L0'
    """

    name: str
    values: tuple[int, ...]
    default: int
    help: str = ""
    pass_name: str = ""
    site: str = ""

    def __post_init__(self) -> None:
        if not KNOB_NAME.match(self.name):
            raise KtxError(f"knob name {self.name!r} is not an upper-case C identifier (like UNROLL_L3)")
        values = tuple(sorted({int(v) for v in self.values}))
        if not values:
            raise KtxError(f"knob {self.name!r} has an empty domain")
        if self.default not in values:
            raise KtxError(f"knob {self.name!r}: default {self.default} is not in its domain {list(values)}")
        object.__setattr__(self, "values", values)

    @property
    def macro(self) -> str:
        return MACRO_PREFIX + self.name

    @property
    def constexpr(self) -> str:
        return CONSTEXPR_PREFIX + self.name

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "values": list(self.values),
            "default": self.default,
            "help": self.help,
            "pass": self.pass_name,
            "site": self.site,
        }

    @staticmethod
    def from_json(data: Mapping[str, object]) -> Knob:
        raw = data.get("values", [])
        values = tuple(int(str(v)) for v in raw) if isinstance(raw, list) else ()
        return Knob(
            str(data["name"]),
            values,
            int(str(data["default"])),
            str(data.get("help", "")),
            str(data.get("pass", "")),
            str(data.get("site", "")),
        )


# -- sites and outcomes ------------------------------------------------------------------------


@dataclass(frozen=True)
class Site:
    """A place a pass rewrites; passes subclass it to carry what rewrite() needs."""

    label: str
    span: Span


@dataclass(frozen=True)
class Skip:
    """A site the pass leaves alone, and why: a remark for the user, never an error."""

    reason: str
    label: str = ""
    span: Span | None = None


class Refuse(Exception):
    """Raised from :meth:`Pass.rewrite` to abandon the site (its edits are dropped) with a reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Outcome:
    """What happened at one site; ``status`` says which kind (see the subclasses)."""

    pass_name: str
    site: str
    line: int
    message: str
    status: ClassVar[str] = ""

    def to_json(self) -> dict[str, object]:
        return {
            "pass": self.pass_name,
            "site": self.site,
            "line": self.line,
            "status": self.status,
            "message": self.message,
        }


@dataclass(frozen=True)
class Rewritten(Outcome):
    """The site was rewritten; ``message`` lists the knobs it exposed."""

    knobs: tuple[str, ...] = ()
    status: ClassVar[str] = "rewritten"


@dataclass(frozen=True)
class Skipped(Outcome):
    """The pass left the site alone (a :class:`Skip` or a :class:`Refuse`)."""

    status: ClassVar[str] = "skipped"


@dataclass(frozen=True)
class RolledBack(Outcome):
    """The site's edits produced code that does not parse and were undone (a pass bug)."""

    status: ClassVar[str] = "rolled-back"


def outcome_from_json(data: Mapping[str, object]) -> Outcome:
    status = str(data.get("status", ""))
    args = (str(data["pass"]), str(data["site"]), int(str(data.get("line", 0))), str(data["message"]))
    if status == "rewritten":
        return Rewritten(*args)
    if status == "rolled-back":
        return RolledBack(*args)
    return Skipped(*args)


# -- what a pass sees --------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """The kernel being templated, as one pass sees it.

    ``labels`` gives every loop of the module a stable name across passes: ``L<id>`` for a
    loop of the original file (its id in the original :attr:`Module.loops`, as ``ktx inspect``
    shows it), ``L3_1`` for the first loop a pass created inside ``L3``.
    """

    module: Module
    kernel: Function
    mapping: LaunchMapping | None
    template_args: tuple[str, ...]
    knobs: Mapping[str, Knob]
    labels: Mapping[int, str]

    def label(self, loop: Loop) -> str:
        return self.labels.get(loop.id, f"L{loop.id}")

    @property
    def loops(self) -> tuple[Loop, ...]:
        return self.module.loops_in(self.kernel)

    @property
    def launches(self) -> tuple[LaunchSite, ...]:
        return self.module.launches_of(self.kernel.name)

    def loop(self, label: str) -> Loop | None:
        return next((lp for lp in self.loops if self.label(lp) == label), None)

    # -- placeholders: exactly the template's own names, never a user's ``KTX_`` identifier --

    @property
    def placeholders(self) -> frozenset[str]:
        """The identifiers the template so far writes for its knobs (``KTX_BLOCK_X``,
        ``ktx_UNROLL_L0``) and its helpers; a user's ``#define KTX_HOLDOUT_WARP 32`` is code."""
        names = [n for k in self.knobs.values() for n in (k.macro, k.constexpr)]
        return frozenset([*names, *HELPERS])

    def placeholders_in(self, text: str) -> list[str]:
        """The placeholders ``text`` names, in order (what "is this already a knob?" asks)."""
        ours = self.placeholders
        return [m.group(0) for m in _IDENT.finditer(text) if m.group(0) in ours]

    def knob_of(self, text: str) -> Knob | None:
        """The knob whose placeholder ``text`` is (whitespace aside), or None."""
        stripped = text.strip()
        return next((k for k in self.knobs.values() if stripped in (k.macro, k.constexpr)), None)

    def text(self, span: Span) -> str:
        return self.module.text(span)


class Rewriter:
    """Collects one site's edits, knobs, constraints and launch changes (a transaction).

    Edits are byte ranges of the module the pass sees. The pipeline commits the whole site
    or, when an edit overlaps another or breaks the syntax, none of it.
    """

    def __init__(self, target: Target, pass_name: str, site: str) -> None:
        self.target = target
        self.pass_name = pass_name
        self.site = site
        self.edits: list[Edit] = []
        self.knobs: list[Knob] = []
        self.constraints: list[str] = []
        self.mapping = target.mapping
        self.template_args = target.template_args
        self.notes: list[str] = []

    # -- text ----------------------------------------------------------------------------

    def replace(self, span: Span, text: str) -> None:
        self._add(Edit(span.start, span.end, text, self.pass_name, self.site))

    def replace_bytes(self, start: int, end: int, text: str) -> None:
        self._add(Edit(start, end, text, self.pass_name, self.site))

    def insert(self, offset: int, text: str) -> None:
        self._add(Edit(offset, offset, text, self.pass_name, self.site))

    def _add(self, edit: Edit) -> None:
        for other in self.edits:
            if edit.overlaps(other):
                raise Refuse(f"two edits of this site overlap at byte {edit.start} (a pass bug)")
        self.edits.append(edit)

    # -- knobs ---------------------------------------------------------------------------

    def knob(self, name: str, values: Iterable[int], default: int, help: str) -> str:
        """Declare a knob; returns its placeholder (``KTX_<name>``) to write into the source."""
        if name in self.target.knobs or any(k.name == name for k in self.knobs):
            raise Refuse(f"knob {name} already exists in this template")
        knob = Knob(name, tuple(values), default, help, self.pass_name, self.site)
        for placeholder in (knob.macro, knob.constexpr):
            # The knob is new, so the name in the source is the user's: taking it would make
            # the user's identifier a knob, or the knob the user's value.
            found = re.search(rf"\b{re.escape(placeholder)}\b", _code_of(self.target.module))
            if found is not None:
                line = self.target.module.location(found.start()).line
                raise Refuse(
                    f"the knob's placeholder {placeholder} is a name of your source (line {line}); "
                    f"rename yours to let {self.pass_name} expose {name}"
                )
        self.knobs.append(knob)
        return knob.macro

    def constraint(self, text: str) -> None:
        """A predicate over knobs (and shape variables) every config must satisfy. It may name
        the launch's block (:data:`LAUNCH_BLOCK`): the pipeline writes in the final mapping's
        block, so the constraint follows a block a later pass makes a knob."""
        names = Expr.parse(text).names
        if names & set(LAUNCH_BLOCK) and self.target.mapping is None:
            raise Refuse(f"{text} relates a knob to the launch's block, and the kernel has no launch mapping")
        self.constraints.append(text)

    def note(self, text: str) -> None:
        """A remark shown with the site's outcome (why a choice was made)."""
        self.notes.append(text)

    # -- launch --------------------------------------------------------------------------

    def set_mapping(self, mapping: LaunchMapping) -> None:
        self.mapping = mapping

    def set_template_arg(self, index: int, text: str) -> None:
        args = list(self.template_args)
        if index >= len(args):
            raise Refuse(f"the kernel has no template argument #{index}")
        args[index] = text
        self.template_args = tuple(args)


def _code_of(module: Module) -> str:
    """The module's text with comments blanked (a golden's CHECK lines name placeholders)."""
    return user_code(module.text_str)


#: Names a constraint may use for the launch's block, one per axis: the pipeline writes in the
#: block of the *final* launch mapping (:func:`resolve_launch_names`). Why: a pass that relates a
#: knob to the block (an items count that must cover the row, a shared array indexed by the warp
#: id) runs before ``block-size`` makes the block a knob; written with the block as it is then
#: (256), the constraint would hold the knob to the old block and exclude configs where the new
#: one covers the data (DeepSpeed pre_rms_norm: 512 threads with UNROLL=1 at 4096 columns).
LAUNCH_BLOCK = ("launch_block_x", "launch_block_y", "launch_block_z")


def resolve_launch_names(text: str, mapping: LaunchMapping | None) -> str:
    """``text`` (a constraint) with :data:`LAUNCH_BLOCK` names replaced by ``mapping``'s block
    expressions (vars inlined: shapes and knobs only); ``text`` itself when it names none.

    >>> m = LaunchMapping(("rows",), ("block",), "0", (("block", "BLOCK_X if BLOCK_X else 256"),), "spec")
    >>> resolve_launch_names("U * 8 * launch_block_x >= 4096", m)
    'U * 8 * (BLOCK_X if BLOCK_X else 256) >= 4096'
    """
    names = Expr.parse(text).names & set(LAUNCH_BLOCK)
    if not names:
        return text
    if mapping is None:
        raise KtxError(f"the constraint {text!r} names the launch's block, and the kernel has no launch")
    block = mapping.resolved().block
    env = {name: (block[axis] if axis < len(block) else "1") for axis, name in enumerate(LAUNCH_BLOCK)}
    return substitute(text, env)


S = TypeVar("S", bound=Site)


class Pass(Generic[S]):
    """Base class of every pass. Subclass it, fill in the metadata, implement two methods.

    Options arrive typed in ``self.options`` (defaults filled in).
    """

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    description: ClassVar[str] = ""
    knobs: ClassVar[tuple[KnobSpec, ...]] = ()
    options: ClassVar[tuple[Option, ...]] = ()
    #: What kind of change the pass makes (the planner's order); every built-in pass sets it.
    phase: ClassVar[Phase] = Phase.HINTS
    requires: ClassVar[tuple[str, ...]] = ()
    after: ClassVar[tuple[str, ...]] = ()
    #: Soft ordering: run after these when present, unless a hard edge (``requires``/``after``)
    #: says otherwise; an edge that would close a cycle is left out instead of failing.
    prefer_after: ClassVar[tuple[str, ...]] = ()
    conflicts: ClassVar[tuple[str, ...]] = ()
    #: The pipeline adds the pass itself where it has a site (``inline``): the planner never
    #: proposes it, and its probe is not taken.
    automatic: ClassVar[bool] = False

    def __init__(self, **options: OptionValue) -> None:
        declared = {o.name: o for o in type(self).options}
        unknown = sorted(set(options) - set(declared))
        if unknown:
            raise KtxError(
                f"pass {self.name!r} has no option {unknown[0]!r}",
                None,
                "options: " + (", ".join(declared) or "none"),
            )
        self.values: dict[str, OptionValue] = {n: options.get(n, o.default) for n, o in declared.items()}

    def option(self, name: str) -> OptionValue:
        return self.values[name]

    def int_option(self, name: str) -> int:
        value = self.values[name]
        assert isinstance(value, int)
        return value

    def list_option(self, name: str) -> tuple[str, ...]:
        value = self.values[name]
        assert isinstance(value, tuple)
        return tuple(str(v) for v in value)

    def sites(self, target: Target) -> Iterator[S | Skip]:
        raise NotImplementedError

    def rewrite(self, site: S, rw: Rewriter) -> None:
        raise NotImplementedError

    def describe(self) -> str:
        """The pass with its non-default options, as pipeline text (``unroll{max=4}``)."""
        declared = {o.name: o for o in type(self).options}
        changed = [f"{n}={declared[n].format(v)}" for n, v in self.values.items() if v != declared[n].default]
        return f"{self.name}{{{','.join(changed)}}}" if changed else self.name
