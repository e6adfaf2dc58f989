"""Templates: rewritten source with knobs as placeholders, the knob space, the launch, the trace.

**Placeholders are ``KTX_`` macros, not C++ template parameters.** A knob must reach places a
template parameter cannot, or only with a rewrite of every caller: host launch code
(``dim3 block(KTX_BLOCK_X)``), ``#define`` and ``constexpr`` values, ``__launch_bounds__``
and the kernel's own template arguments at launch sites. Macros reach all of them, leave the
kernel's signature and name expression unchanged (the harness keeps launching
``silu_and_mul_kernel<__nv_bfloat16>``), and let one template source build any config with
``-DKTX_NAME=value``. The template compiles as it is: a guarded header gives every macro its
default, which reproduces the original kernel::

    // ktx:knobs begin ...
    #ifndef KTX_UNROLL_L0
    #define KTX_UNROLL_L0 0  // unroll: ...
    #endif
    static constexpr int ktx_UNROLL_L0 = KTX_UNROLL_L0;  // #pragma unroll does not expand macros
    // ktx:knobs end

Two placeholders need more than a macro, and :func:`lower` turns both into plain code:
``#pragma unroll ktx_UNROLL_L0`` (pragmas do not expand macros, so the pragma names a
``constexpr`` mirror of the knob; value 0 means "no pragma") and
``KTX_PICK(KTX_BLOCK_X, (original))`` (the knob, or the original shape-dependent expression
when the knob is 0). ``KTX_CDIV(a, b)`` is a ceiling division. A pass that chooses between code
variants writes ``#if KTX_VEC_L0 > 1`` ... ``#else`` ... ``#endif``: instantiation keeps the
selected branch and drops directives whose conditions name only knobs. :meth:`Template.instantiate`
substitutes values, lowers those helpers, folds ``__launch_bounds__`` arguments, drops the
header and leaves one comment line saying which config this is: readable CUDA to paste back.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ktx.ir import Edit
from ktx.ir.edits import splice
from ktx.ir.errors import KtxError
from ktx.ir.expr import Expr, Value
from ktx.ir.launch import LaunchMapping

from ktx.passbase import CONSTEXPR_PREFIX, HELPERS, MACRO_PREFIX, Knob, Outcome, outcome_from_json
from ktx.usercode import (
    HEADER_BEGIN,
    HEADER_BEGIN_LINE,
    HEADER_END,
    HEADER_END_LINE,
    comment_spans,
    inside,
    user_code,
)

TRACE_VERSION = 1
_PLACEHOLDER = re.compile(r"\{([A-Z][A-Z0-9_]*)\}")

Config = Mapping[str, int]


# -- the knob space ----------------------------------------------------------------------------


@dataclass(frozen=True)
class KnobSpace:
    """Knobs (finite integer domains with defaults) and constraints over knobs and shapes.

    Constraints are :mod:`ktx.ir.expr` predicates. One that names a shape variable
    (``d % (VEC * 32) == 0``) can only be checked for a shape; without one it is left to the
    harness.

    >>> space = KnobSpace((Knob("B", (32, 64, 128), 64), Knob("K", (1, 2, 4), 1)), ("B * K <= 256",))
    >>> space.complete({"K": 2})
    {'B': 64, 'K': 2}
    >>> space.violations({"B": 128, "K": 4})
    ('B * K <= 256',)
    """

    knobs: tuple[Knob, ...] = ()
    constraints: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        names = [k.name for k in self.knobs]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise KtxError(f"knob {dupes[0]!r} is declared twice")
        for text in self.constraints:
            Expr.parse(text)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(k.name for k in self.knobs)

    def knob(self, name: str) -> Knob:
        found = next((k for k in self.knobs if k.name == name), None)
        if found is None:
            raise KtxError(f"no knob {name!r}", None, "knobs: " + (", ".join(self.names) or "none"))
        return found

    def defaults(self) -> dict[str, int]:
        return {k.name: k.default for k in self.knobs}

    @property
    def size(self) -> int:
        total = 1
        for k in self.knobs:
            total *= len(k.values)
        return total

    def complete(self, config: Config) -> dict[str, int]:
        """``config`` with missing knobs at their defaults; unknown names and values fail."""
        result = self.defaults()
        for name, value in config.items():
            knob = self.knob(name)
            if value not in knob.values:
                raise KtxError(
                    f"{value} is not a value of knob {name}",
                    None,
                    f"{name} takes {_domain_text(knob.values)}" + (f"; {knob.help}" if knob.help else ""),
                )
            result[name] = int(value)
        return result

    def violations(self, config: Config, shapes: Mapping[str, Value] | None = None) -> tuple[str, ...]:
        """The constraints ``config`` breaks (those naming unknown shapes are not checked)."""
        env: dict[str, Value] = {**(shapes or {}), **self.complete(config)}
        broken: list[str] = []
        for text in self.constraints:
            expr = Expr.parse(text)
            if expr.names <= env.keys() and not expr.evaluate_bool(env):
                broken.append(text)
        return tuple(broken)

    def check(self, config: Config, shapes: Mapping[str, Value] | None = None) -> dict[str, int]:
        """The completed config, or a KtxError naming the broken constraint and the knobs in it."""
        full = self.complete(config)
        broken = self.violations(full, shapes)
        if broken:
            expr = Expr.parse(broken[0])
            involved = [k for k in self.knobs if k.name in expr.names]
            values = ", ".join(f"{k.name}={full[k.name]}" for k in involved)
            domains = "; ".join(f"{k.name} takes {_domain_text(k.values)}" for k in involved)
            raise KtxError(f"config breaks constraint {broken[0]!r} ({values})", None, domains)
        return full

    def feasible(self, config: Config, shapes: Mapping[str, Value] | None = None) -> bool:
        try:
            return not self.violations(config, shapes)
        except KtxError:
            return False

    def sample(
        self, seed: int, shapes: Mapping[str, Value] | None = None, tries: int = 10_000
    ) -> dict[str, int]:
        """A random feasible config, the same for the same seed."""
        rng = random.Random(seed)
        for _ in range(tries):
            config = {k.name: rng.choice(k.values) for k in self.knobs}
            if self.feasible(config, shapes):
                return config
        raise KtxError(f"no feasible config found in {tries} random draws", None, "relax the constraints")

    def to_json(self) -> dict[str, Any]:
        return {
            "knobs": [
                {"name": k.name, "values": list(k.values), "default": k.default, **_extra(k)}
                for k in self.knobs
            ],
            "constraints": list(self.constraints),
        }


def _extra(k: Knob) -> dict[str, str]:
    return {"help": k.help, "pass": k.pass_name, "site": k.site}


def _domain_text(values: Sequence[int]) -> str:
    return "{" + ", ".join(str(v) for v in values) + "}"


# -- the trace ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One pass of a pipeline run: which pass, why it ran, its edits and per-site outcomes.

    Edits are byte ranges of the source *as that step saw it* (the previous step's output).
    """

    pass_name: str
    invocation: str
    reason: str
    edits: tuple[Edit, ...]
    outcomes: tuple[Outcome, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "pass": self.pass_name,
            "invocation": self.invocation,
            "reason": self.reason,
            "edits": [e.to_json() for e in self.edits],
            "outcomes": [o.to_json() for o in self.outcomes],
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> Step:
        return Step(
            str(data["pass"]),
            str(data.get("invocation", data["pass"])),
            str(data.get("reason", "")),
            tuple(Edit.from_json(e) for e in data.get("edits", [])),
            tuple(outcome_from_json(o) for o in data.get("outcomes", [])),
        )


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Trace:
    """Passes, sites and edits of one pipeline run; :meth:`replay` rebuilds the template bytes.

    Besides the steps it records the result (knobs, constraints, launch mapping, template
    arguments), so a template can be reloaded from the original source plus its trace
    (:meth:`Template.from_trace`) without running any pass.
    """

    kernel: str
    pipeline: str
    source_sha256: str
    result_sha256: str
    steps: tuple[Step, ...]
    knobs: tuple[Knob, ...] = ()
    constraints: tuple[str, ...] = ()
    mapping: LaunchMapping | None = None
    template_args: tuple[str, ...] = ()

    def replay(self, source: bytes) -> bytes:
        """Apply the recorded edits to ``source``; fails if it is not the traced input."""
        if sha256(source) != self.source_sha256:
            raise KtxError(
                "the trace was recorded on a different source",
                None,
                "replay it on the file it was made from",
            )
        out = source
        for step in self.steps:
            out = splice(out, step.edits)
        if sha256(out) != self.result_sha256:  # pragma: no cover - splice is deterministic
            raise KtxError("replaying the trace gave different bytes than recorded")
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "version": TRACE_VERSION,
            "kernel": self.kernel,
            "pipeline": self.pipeline,
            "source_sha256": self.source_sha256,
            "result_sha256": self.result_sha256,
            "steps": [s.to_json() for s in self.steps],
            "result": {
                "knobs": [k.to_json() for k in self.knobs],
                "constraints": list(self.constraints),
                "mapping": self.mapping.to_json() if self.mapping is not None else None,
                "template_args": list(self.template_args),
            },
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=1) + "\n"

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> Trace:
        if data.get("version") != TRACE_VERSION:
            raise KtxError(
                f"unsupported trace version {data.get('version')!r}", None, f"expected {TRACE_VERSION}"
            )
        result = data.get("result", {})
        mapping = result.get("mapping")
        return Trace(
            str(data["kernel"]),
            str(data["pipeline"]),
            str(data["source_sha256"]),
            str(data["result_sha256"]),
            tuple(Step.from_json(s) for s in data["steps"]),
            tuple(Knob.from_json(k) for k in result.get("knobs", [])),
            tuple(str(c) for c in result.get("constraints", [])),
            LaunchMapping.from_json(mapping) if mapping else None,
            tuple(str(a) for a in result.get("template_args", [])),
        )


# -- the template ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Template:
    """The result of a pipeline: what to compile, what to search, how to launch, how it was made."""

    kernel: str
    path: str | None
    original: str
    source: str
    space: KnobSpace
    mapping: LaunchMapping | None
    template_args: tuple[str, ...]
    trace: Trace
    outcomes: tuple[Outcome, ...] = field(default=())
    #: The namespaces around the kernel (``vllm`` or ``a::b``), from the spec's ``kernel =
    #: "vllm::rms_norm"``: the name expression the compiler resolves is qualified with it.
    scope: str = ""

    @property
    def pipeline(self) -> str:
        return self.trace.pipeline

    @property
    def knobs(self) -> tuple[Knob, ...]:
        return self.space.knobs

    def instantiate(self, config: Config | None = None) -> str:
        """Concrete CUDA for ``config`` (missing knobs take defaults); checks domains and constraints."""
        full = self.space.check(config or {})
        return lower(self.source, full, self.pipeline, self.placeholders)

    @property
    def placeholders(self) -> frozenset[str]:
        """Exactly the identifiers this template wrote for its knobs (``KTX_BLOCK_X``,
        ``ktx_UNROLL_L0``) and the helpers (``KTX_PICK``, ``KTX_CDIV``): every other ``KTX_``
        name in the source is the user's own code, left as written."""
        return placeholder_names(self.space.knobs)

    def name_expression(self, config: Config | None = None) -> str:
        """``kernel<args>`` for the instantiated kernel; knob placeholders ``{NAME}`` filled in.

        Other ``{expr}`` placeholders (a spec's ``{topk}``) are kept for the harness to expand.
        """
        full = self.space.complete(config or {})
        kernel = f"{self.scope}::{self.kernel}" if self.scope else self.kernel
        if not self.template_args:
            return kernel
        args = [
            _PLACEHOLDER.sub(lambda m: str(full[m.group(1)]) if m.group(1) in full else m.group(0), a)
            for a in self.template_args
        ]
        return f"{kernel}<{', '.join(args)}>"

    def launch(self) -> LaunchMapping | None:
        """Grid, block and shared as standalone expressions over shape variables and knob names."""
        return self.mapping.resolved() if self.mapping is not None else None

    def candidate_fields(self, config: Config | None = None) -> dict[str, Any]:
        """The fields of the harness's ``Candidate``: source, name expression, launch, config
        and the constraints (odd-size verification skips the shapes they exclude)."""
        full = self.space.check(config or {})
        launch = self.launch()
        if launch is None:
            raise KtxError(
                f"no launch mapping for {self.kernel}",
                None,
                "the file has no launch of the kernel; pass the spec's mapping",
            )
        return {
            "source": lower(self.source, full, self.pipeline, self.placeholders),
            "name_expression": self.name_expression(full),
            "grid": launch.grid,
            "block": launch.block,
            "shared": launch.shared,
            "config": full,
            "constraints": tuple(self.space.constraints),
        }

    def to_json(self) -> dict[str, Any]:
        """The knob space, launch and name expression: what ``ktx apply --knobs`` prints."""
        launch = self.launch()
        return {
            "kernel": self.kernel,
            "pipeline": self.pipeline,
            **self.space.to_json(),
            "launch": None
            if launch is None
            else {"grid": list(launch.grid), "block": list(launch.block), "shared": launch.shared},
            "name_expression": self.name_expression(),
            "template_args": list(self.template_args),
        }

    @staticmethod
    def from_trace(original: str | bytes, trace: Trace, path: str | None = None) -> Template:
        """Rebuild a template from its original source and trace, without running passes."""
        data = original.encode() if isinstance(original, str) else original
        source = trace.replay(data)
        return Template(
            trace.kernel,
            path,
            data.decode("utf-8", "surrogateescape"),
            source.decode("utf-8", "surrogateescape"),
            KnobSpace(trace.knobs, trace.constraints),
            trace.mapping,
            trace.template_args,
            trace,
            tuple(o for s in trace.steps for o in s.outcomes),
        )


# -- header and lowering -----------------------------------------------------------------------


def header(knobs: Sequence[Knob], source: str, kernel: str, pipeline: str, newline: str = "\n") -> str:
    """The guarded knob header that makes a template compile with every knob at its default."""
    ours = [k.macro for k in knobs] + [k.constexpr for k in knobs] + ["KTX_PICK", "KTX_CDIV"]
    code = user_code(source)
    for name in ours:
        line = _user_definition(code, name)
        if line is not None:
            raise KtxError(
                f"the source defines {name} (line {line}), a name ktx uses for a knob placeholder",
                None,
                "rename it; ktx leaves every other KTX_ name of yours alone",
            )
    lines = [
        HEADER_BEGIN,
        f"// {kernel} templated by `{pipeline}`.",
        "// Each KTX_ macro is a knob; the defaults reproduce the original. Pick other values with",
        "// `ktx apply --config NAME=VALUE` (clean code) or -DKTX_NAME=VALUE.",
    ]
    for k in knobs:
        note = f"  // {k.pass_name}: {k.help}" if k.help else ""
        lines += [f"#ifndef {k.macro}", f"#define {k.macro} {k.default}{note}", "#endif"]
    if "KTX_PICK(" in source:
        lines += [
            "#ifndef KTX_PICK  // the knob, or the original expression when the knob is 0",
            "#define KTX_PICK(knob, original) ((knob) ? (knob) : original)",
            "#endif",
        ]
    if "KTX_CDIV(" in source:
        lines += ["#ifndef KTX_CDIV", "#define KTX_CDIV(a, b) (((a) + (b) - 1) / (b))", "#endif"]
    pragma_knobs = [k for k in knobs if re.search(rf"\b{k.constexpr}\b", source)]
    if pragma_knobs:
        lines.append("#pragma nv_diag_suppress 20168  // `#pragma unroll 0` (compiler's choice) is ignored")
        lines += [
            f"static constexpr int {k.constexpr} = {k.macro};  // #pragma unroll does not expand macros"
            for k in pragma_knobs
        ]
    lines.append(HEADER_END)
    return newline.join(lines) + newline


def placeholder_names(knobs: Sequence[Knob]) -> frozenset[str]:
    """The identifiers a template with ``knobs`` writes as placeholders, and nothing else."""
    return frozenset([*(k.macro for k in knobs), *(k.constexpr for k in knobs), *HELPERS])


def lower(
    source: str, values: Mapping[str, int], pipeline: str = "", placeholders: frozenset[str] | None = None
) -> str:
    """Template source -> concrete source for ``values`` (every knob must have one).

    Only code is rewritten: comments that mention a placeholder are left as written.
    ``placeholders`` are the template's own names (:attr:`Template.placeholders`); a user's
    ``#define KTX_HOLDOUT_WARP 32`` is not among them and stays code. Without them the knob
    header's names are used, or, for a source with no header, every ``KTX_`` name.
    """
    declared = placeholders if placeholders is not None else header_placeholders(source)
    text = _drop_header(source, values, pipeline)
    text = _lower_conditionals(text, values)
    text = _lower_calls(text, values)
    text = _lower_pragmas(text, values)
    names = "|".join(sorted(values, key=len, reverse=True))
    if names:
        text = _sub_code(rf"\b{MACRO_PREFIX}({names})\b", lambda m: str(values[m.group(1)]), text)
    text = _lower_launch_bounds(text)
    text = _lower_cluster_dims(text)
    comments = comment_spans(text)
    for leftover in re.finditer(
        rf"\b(?:{MACRO_PREFIX}[A-Z][A-Z0-9_]*|{CONSTEXPR_PREFIX}[A-Z][A-Z0-9_]*)\b", text
    ):
        # Only the header's knobs are placeholders: the user's own ``KTX_...`` names are code.
        ours = declared is None or leftover.group(0) in declared
        if ours and not inside(leftover.start(), comments):
            raise KtxError(f"placeholder {leftover.group(0)} has no value", None, "is the config complete?")
    return text


def header_placeholders(source: str) -> frozenset[str] | None:
    """The placeholder names the knob header declares (``KTX_BLOCK_X``, ``ktx_UNROLL_L0``...).

    Every other ``KTX_`` name in a template is the user's own and is left as written. None when
    ``source`` has no header (then every ``KTX_`` name is taken for a placeholder).

    >>> header_placeholders(header([], "KTX_PICK(KTX_A, (1))", "k", "p")) == {"KTX_PICK"}
    True
    """
    begin = HEADER_BEGIN_LINE.search(source)
    stop = HEADER_END_LINE.search(source, begin.end()) if begin is not None else None
    if begin is None or stop is None:
        return None
    body = source[begin.end() : stop.start()]
    names = re.findall(r"(?m)^[ \t]*#[ \t]*ifndef[ \t]+(\w+)", body)
    names += re.findall(r"static constexpr int (\w+)", body)
    return frozenset(names)


def _user_definition(blank: str, name: str) -> int | None:
    """The line where the user's code (see :func:`ktx.usercode.user_code`) defines ``name``, or None."""
    m = re.search(rf"(?m)^[ \t]*#[ \t]*define[ \t]+{re.escape(name)}\b", blank)
    if m is None:
        m = re.search(rf"\b(?:constexpr|const|int|unsigned|auto)\s+(?:int\s+)?{re.escape(name)}\s*=", blank)
    return None if m is None else blank.count("\n", 0, m.start()) + 1


def _sub_code(pattern: str, repl: Callable[[re.Match[str]], str], text: str) -> str:
    """``re.sub`` that leaves comments alone."""
    comments = comment_spans(text)
    return re.sub(pattern, lambda m: m.group(0) if inside(m.start(), comments) else repl(m), text)


_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*(if|ifdef|ifndef|elif|else|endif)\b(.*?)(?://.*)?$")
_KNOB_MACRO = re.compile(rf"\b{MACRO_PREFIX}([A-Z][A-Z0-9_]*)\b")


def _knob_condition(cond: str, values: Mapping[str, int]) -> bool | None:
    """The value of an ``#if``/``#elif`` condition over knobs only; None when it names anything else.

    >>> _knob_condition("KTX_VEC > 1 && KTX_VEC <= 8", {"VEC": 4}), _knob_condition("defined(X)", {})
    (True, None)
    """
    if not _KNOB_MACRO.search(cond):
        return None
    text = _KNOB_MACRO.sub(lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0), cond)
    if re.search(r"[A-Za-z_]", text.replace("&&", "").replace("||", "")):
        return None
    text = text.replace("&&", " and ").replace("||", " or ").replace("/", "//")
    text = re.sub(r"!(?!=)", " not ", text)
    try:
        return bool(Expr.parse(text).evaluate({}))
    except KtxError:
        return None


def _lower_conditionals(text: str, values: Mapping[str, int]) -> str:
    """Resolve ``#if``/``#elif``/``#else``/``#endif`` groups whose conditions name only knobs.

    Passes that choose between code variants (vectorize's packed loop or the original one,
    fast-math's intrinsics or the original math) write them as preprocessor groups on
    ``KTX_`` knobs, so the template compiles as is; instantiation keeps the branch the config
    selects and drops the directives, leaving plain code. Other groups are left alone.
    """
    out: list[str] = []
    # Each frame: (resolved, this branch kept, some branch already kept).
    stack: list[tuple[bool, bool, bool]] = []

    def visible() -> bool:
        return all(kept for resolved, kept, _ in stack if resolved)

    for line in text.splitlines(keepends=True):
        m = _DIRECTIVE.match(line.rstrip("\r\n"))
        if m is None:
            if visible():
                out.append(line)
            continue
        word, cond = m.group(1), m.group(2)
        if word in ("if", "ifdef", "ifndef"):
            value = _knob_condition(cond, values) if word == "if" else None
            if value is None:
                stack.append((False, True, True))
                if visible():
                    out.append(line)
            else:
                stack.append((True, value, value))
            continue
        if not stack:
            if visible():
                out.append(line)
            continue
        resolved, _, taken = stack[-1]
        if not resolved:
            if word == "endif":
                stack.pop()
            if visible():
                out.append(line)
            continue
        if word == "elif":
            value = _knob_condition(cond, values)
            if value is None:
                raise KtxError(f"#elif {cond.strip()!r} in a group over knobs must name only knobs")
            stack[-1] = (True, not taken and value, taken or value)
        elif word == "else":
            stack[-1] = (True, not taken, True)
        else:
            stack.pop()
    return "".join(out)


def _drop_header(source: str, values: Mapping[str, int], pipeline: str) -> str:
    begin = HEADER_BEGIN_LINE.search(source)
    if begin is None:
        return source
    start = begin.start()
    stop = HEADER_END_LINE.search(source, begin.end())
    if stop is None:
        raise KtxError("the knob header has no end marker", None, f"restore the line {HEADER_END!r}")
    end = source.find("\n", stop.end())
    end = len(source) if end < 0 else end + 1
    config = ", ".join(f"{k}={v}" for k, v in values.items())
    line = f"// ktx: `{pipeline}` instantiated with {config}\n" if values else ""
    return source[:start] + line + source[end:]


def _split_args(text: str, open_at: int) -> tuple[list[str], int]:
    """Top-level comma-separated arguments of the call whose ``(`` is at ``open_at``; and the end."""
    depth = 0
    args: list[str] = []
    start = open_at + 1
    i = open_at
    while i < len(text):
        ch = text[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                args.append(text[start:i])
                return args, i + 1
        elif ch == "," and depth == 1:
            args.append(text[start:i])
            start = i + 1
        i += 1
    raise KtxError("unbalanced parentheses in a ktx placeholder")


def _strip_parens(text: str) -> str:
    t = text.strip()
    if t.startswith("(") and t.endswith(")"):
        args, end = _split_args(t, 0)
        if end == len(t) and len(args) == 1:
            return args[0].strip()
    return t


def _atom(text: str) -> str:
    """``text`` ready to be an operand of ``+``: parenthesised unless it binds tighter already."""
    t = text.strip()
    depth = 0
    for ch in t:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0 and ch in "+-?<>=&|!^~,":
            return f"({t})"
    return t


def _value(text: str, values: Mapping[str, int]) -> int | None:
    """The integer value of knob arithmetic such as ``32 * KTX_BLOCK_Y``, or None."""
    t = re.sub(
        rf"\b{MACRO_PREFIX}([A-Z][A-Z0-9_]*)\b",
        lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0),
        text.strip(),
    )
    folded = _fold(t)
    return int(folded) if re.fullmatch(r"-?\d+", folded) else None


def _lower_calls(text: str, values: Mapping[str, int]) -> str:
    """Replace ``KTX_PICK(k, (e))`` and ``KTX_CDIV(a, b)`` by plain code, innermost first."""
    pattern = re.compile(r"\bKTX_(PICK|CDIV)\s*\(")
    while True:
        comments = comment_spans(text)
        found = [m for m in pattern.finditer(text) if not inside(m.start(), comments)]
        if not found:
            return text
        m = found[-1]  # the last one cannot contain another
        args, end = _split_args(text, m.end() - 1)
        if len(args) != 2:
            raise KtxError(f"KTX_{m.group(1)} takes two arguments, got {len(args)}")
        if m.group(1) == "PICK":
            knob = _value(args[0], values)
            if knob is None:
                raise KtxError(f"KTX_PICK's first argument {args[0].strip()!r} is not a knob")
            replacement = _strip_parens(args[1]) if knob == 0 else str(knob)
        else:
            divisor = _value(args[1], values)
            a = args[0].strip()
            if divisor == 1:
                replacement = _strip_parens(a)
            elif divisor is not None:
                replacement = f"({_atom(a)} + {divisor - 1}) / {divisor}"
            else:
                b = _atom(args[1])
                replacement = f"({_atom(a)} + {b} - 1) / {b}"
        text = text[: m.start()] + replacement + text[end:]


def _lower_pragmas(text: str, values: Mapping[str, int]) -> str:
    def one(m: re.Match[str]) -> str:
        name = m.group(2)
        if name not in values:
            return m.group(0)
        value = values[name]
        return "" if value == 0 else f"{m.group(1)}#pragma unroll {value}{m.group(3)}"

    return re.sub(rf"(?m)^([ \t]*)#pragma unroll {CONSTEXPR_PREFIX}([A-Z][A-Z0-9_]*)[ \t]*(\r?\n)", one, text)


def _lower_launch_bounds(text: str) -> str:
    """Fold ``__launch_bounds__`` arguments; drop a zero bound (``(0)`` is no bound, as in nvcc)."""
    out: list[str] = []
    pos = 0
    comments = comment_spans(text)
    for m in re.finditer(r"__launch_bounds__\s*\(", text):
        if m.start() < pos or inside(m.start(), comments):
            continue
        args, end = _split_args(text, m.end() - 1)
        folded = [_fold(a) for a in args]
        while len(folded) > 1 and folded[-1] == "0":
            folded.pop()
        out.append(text[pos : m.start()])
        if folded == ["0"]:
            while end < len(text) and text[end] == " ":
                end += 1
        else:
            out.append(f"__launch_bounds__({', '.join(folded)})")
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _lower_cluster_dims(text: str) -> str:
    """Drop ``__attribute__((cluster_dims(1, 1, 1)))``: a cluster of one block is no cluster (the
    original kernel, as ``cluster-rows`` leaves it at ``CLUSTER = 1``)."""
    one = r"__attribute__\(\(cluster_dims\(\s*1\s*,\s*1\s*,\s*1\s*\)\)\) ?"
    return _sub_code(one, lambda m: "", text)


def _fold(arg: str) -> str:
    text = arg.strip()
    if not re.fullmatch(r"[\d\s+\-*/()%]+", text):
        return text
    try:
        value = Expr.parse(text.replace("/", "//")).evaluate({})
    except KtxError:
        return text
    return str(value) if isinstance(value, int) else text
