"""Integer parameters a kernel indexes with as strides, and their values for a dense layout.

A launcher often passes strides it reads from its tensors (ggml's ``s01 = nb01 / sizeof(T)``,
FlashInfer's ``input.stride(0)``): ktx cannot follow them, but the kernel's index order says
what they are when the tensor is contiguous, which is what a spec's shape points build:

* ``i0 + i1*s1 + i2*s2 + i3*s3`` with ``i0 < ne00`` and ``i1, i2, i3`` the digits of one flat
  index (``i3 = r / (ne01*ne02)``, ``i2 = (r - i3*ne01*ne02) / ne01``, ``i1 = r - ...``): each
  stride is the unit dimension's bound times the digit's divisor (``s2 = ne00 * ne01``);
* ``sample*stride_sample + channel*stride_channel + row*stride_row`` beside a dense offset of the
  same indices (``((sample*nchannels + channel)*nrows + row)*ncols``): each stride is the
  product of the sizes inside its index in that chain (``stride_channel = nrows * ncols``);
* ``bx*stride + i*num_threads*VEC + ...`` with ``i < rounds = ceil_div(d, VEC*num_threads)``:
  the other terms span one row of ``d``, so ``stride = d``.

Every value is a guess (a padded or transposed tensor has other strides): the draft writes it
under a TODO that shows the index it was read from.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

import tree_sitter as ts
from ktx.ir import syntax
from ktx.ir.facts.params import KernelBody

_IDENT = re.compile(r"[A-Za-z_]\w*(?:\.[xyz])?")
#: ``ceil_div(d, VEC * n)``, ``div_up(...)``, ``cdiv(...)``: a loop count rounded up
_CEIL = re.compile(r"\w*(?:ceil_?div|div_?up|cdiv)\s*\((\w+)\s*,\s*(.+)\)", re.I)


@dataclass(frozen=True)
class DenseStride:
    """``param``'s value for a dense layout: ``value`` over the kernel's parameters (and
    ``gridDim.*``), read from ``index`` (the kernel's text)."""

    param: str
    value: str
    index: str


def _strip(text: str) -> str:
    text = " ".join(text.split())
    while text.startswith("(") and text.endswith(")") and _balanced(text[1:-1]):
        text = text[1:-1].strip()
    return text


def _balanced(text: str) -> bool:
    depth = 0
    for c in text:
        depth += {"(": 1, ")": -1}.get(c, 0)
        if depth < 0:
            return False
    return depth == 0


def _split(text: str, op: str) -> list[str]:
    """``text`` split at ``op`` outside parentheses (stripped pieces)."""
    out, depth, start = [], 0, 0
    for i, c in enumerate(text):
        depth += {"(": 1, ")": -1}.get(c, 0)
        if c == op and depth == 0:
            out.append(_strip(text[start:i]))
            start = i + 1
    out.append(_strip(text[start:]))
    return out


def _factors(text: str) -> list[str] | None:
    """The identifiers a product of identifiers multiplies (``a * (b * c)``), or None."""
    out: list[str] = []
    for f in _split(_strip(text), "*"):
        if _IDENT.fullmatch(f):
            out.append(f)
        elif f.startswith("(") and _strip(f) != f and (inner := _factors(_strip(f))) is not None:
            out += inner
        else:
            return None
    return out


def _product(factors: list[str]) -> str:
    return " * ".join(factors) or "1"


def _resolve(k: KernelBody, name: str) -> str:
    """A local that is a launch dimension (``nrows = gridDim.x``) as that dimension."""
    node = k.locals_.get(name)
    if node is not None and re.fullmatch(r"(?:gridDim|blockDim)\.[xyz]", k.text(node)):
        return k.text(node)
    return name


def _sums(k: KernelBody) -> list[str]:
    """Every outermost ``+`` expression of the body, as text."""
    out: list[str] = []
    for n in syntax.walk(k.body):
        if n.type != "binary_expression":
            continue
        op = n.child_by_field_name("operator")
        if op is None or op.type != "+":
            continue
        up: ts.Node | None = n.parent
        while up is not None and up.type == "parenthesized_expression":
            up = up.parent
        outer = up is not None and up.type == "binary_expression"
        upop = up.child_by_field_name("operator") if up is not None else None
        if outer and upop is not None and upop.type in ("+", "-"):
            continue
        out.append(k.text(n))
    for n in syntax.walk(k.body):  # ``x += a*s + b*t`` (a pointer moved by strides)
        if n.type == "assignment_expression":
            op, right = n.child_by_field_name("operator"), n.child_by_field_name("right")
            if op is not None and op.type == "+=" and right is not None:
                out.append(k.text(right))
    return out


def _chain_pitches(text: str) -> tuple[dict[str, list[str]], str] | None:
    """A Horner chain ``((a*n2 + b)*n1 + c)*n0``: each index's pitch in identifiers below the
    unit dimension (``c: [], b: [n1], a: [n2, n1]``) and the unit dimension's size (``n0``);
    None for any other form."""
    if len(_split(_strip(text), "+")) > 1:
        return None  # a sum at the top: no trailing unit size (``a * s + c * n`` is no chain)
    top = _split(_strip(text), "*")
    if len(top) < 2 or not _IDENT.fullmatch(top[-1]):
        return None
    unit = top[-1]
    pitches: dict[str, list[str]] = {}
    body, pitch = _strip(" * ".join(top[:-1])), list[str]()
    while True:
        parts = _split(body, "+")
        if len(parts) == 1:
            f = _split(body, "*")
            if len(f) != 1 or not _IDENT.fullmatch(f[0]):
                return None
            pitches[f[0]] = list(pitch)
            break
        if len(parts) != 2 or not _IDENT.fullmatch(parts[1]):
            return None
        pitches[parts[1]] = list(pitch)
        head = _split(parts[0], "*")
        if len(head) < 2 or not _IDENT.fullmatch(head[-1]):
            return None
        pitch = [head[-1], *pitch]
        body = _strip(" * ".join(head[:-1]))
    return (pitches, unit) if len(pitches) >= 2 else None


def _digit_pitches(k: KernelBody) -> dict[str, list[str]]:
    """The digits of a flat index in the kernel's locals: ``i3 = r / (A*B)`` -> ``[A, B]``,
    ``i2 = (r - i3*A*B) / A`` -> ``[A]``, ``i1 = r - i3*A*B - i2*A`` -> ``[]`` (the pitch of
    each digit in the flat index ``r``)."""
    out: dict[str, list[str]] = {}
    by_root: dict[str, dict[str, list[str]]] = {}
    for name, node in k.locals_.items():
        text = _strip(k.text(node))
        parts = _split(text, "/")
        if len(parts) == 2:
            root = re.match(r"\(*\s*([A-Za-z_]\w*)", parts[0])
            divisor = _factors(parts[1])
            if root is not None and divisor is not None:
                by_root.setdefault(root.group(1), {})[name] = divisor
            continue
        pieces = [_strip(p) for p in re.split(r"\s-\s", text)]
        if len(pieces) >= 2 and _IDENT.fullmatch(pieces[0]):
            by_root.setdefault(pieces[0], {})[name] = []
    for digits in by_root.values():
        if len(digits) >= 2 and any(not p for p in digits.values()):
            out.update(digits)
    return out


def _span(k: KernelBody, terms: list[list[str]]) -> str | None:
    """The row length the non-stride terms of an index cover: a term ``i * G...`` whose ``i``
    is bounded by ``rounds = ceil_div(N, G...)`` spans ``N`` (the other terms stay inside one
    ``G``); a lone unit term ``i0`` bounded by ``n`` spans ``n``."""
    if len(terms) == 1 and len(terms[0]) == 1 and terms[0][0] in k.bounds:
        return k.bounds[terms[0][0]]
    for factors in terms:
        for var in factors:
            bound = k.bounds.get(var)
            node = k.locals_.get(bound) if bound is not None else None
            if node is None:
                continue
            m = re.fullmatch(
                r"\w*(?:ceil_?div|div_?up|cdiv)\s*\((\w+)\s*,\s*(.+)\)", _strip(k.text(node)), re.I
            )
            rest = [f for f in factors if f != var]
            grain = _factors(m.group(2)) if m is not None else None
            if m is not None and grain is not None and _same(k, rest, grain):
                return m.group(1)
    return None


def _same(k: KernelBody, a: list[str], b: list[str]) -> bool:
    """Two products of identifiers equal, locals read once through their initialisers."""

    def flat(fs: list[str]) -> Counter[str]:
        out: Counter[str] = Counter()
        for f in fs:
            node = k.locals_.get(f)
            inner = _factors(k.text(node)) if node is not None else None
            out.update(inner if inner else [f])
        return out

    return flat(a) == flat(b)


def dense_strides(k: KernelBody, scalars: Mapping[str, str]) -> dict[str, DenseStride]:
    """The integer parameters (``scalars``: name -> C type) the kernel multiplies an index by in
    a sum of strided terms, each with its value for a dense layout (see the module's
    docstring); parameters no rule reads are left out."""
    pointers = {p.name for p in k.fn.params if p.is_pointer} | set(k.pointers)
    sums = _sums(k)
    chains = [c for s in sums if (c := _chain_pitches(s)) is not None]
    digits = _digit_pitches(k)
    out: dict[str, DenseStride] = {}
    for text in sums:
        strided: dict[str, str] = {}  # index var -> stride param
        others: list[list[str]] = []
        ok = True
        for term in _split(_strip(text), "+"):
            fs = _factors(term)
            if fs is None:
                ok = False
                break
            if fs == [f for f in fs if f in pointers]:
                continue  # ``input + ...``: the base pointer
            params = [f for f in fs if f in scalars]
            if len(fs) == 2 and len(params) == 1 and fs[0] != fs[1]:
                var = fs[1] if fs[0] == params[0] else fs[0]
                if var in strided or var in scalars:
                    ok = False
                    break
                strided[var] = params[0]
            else:
                others.append(fs)
        if not ok or not strided or len(set(strided.values())) != len(strided):
            continue
        found: dict[str, str] = {}
        chain = next((c for c in chains if set(strided) <= set(c[0])), None)
        if chain is not None and not others:
            pitches, unit = chain
            for var, param in strided.items():
                found[param] = _product([_resolve(k, f) for f in [unit, *reversed(pitches[var])]])
        elif others and set(strided) <= set(digits):
            row = _span(k, others)
            if row is not None:
                for var, param in strided.items():
                    found[param] = _product([row, *digits[var]])
        elif others and len(strided) == 1:
            row = _span(k, others)
            if row is not None:
                found[next(iter(strided.values()))] = row
        for param, value in found.items():
            out.setdefault(param, DenseStride(param, value, text))
    return out


def in_spec_vars(value: str, env: Mapping[str, str], dims: Mapping[str, str]) -> str | None:
    """``value`` (over kernel parameters and launch dimensions) in the spec's variables: each
    parameter by ``env`` (its drafted value, else its own name), each ``gridDim.x`` by ``dims``
    (the drafted launch); None when a launch dimension has no drafted value."""

    def sub(m: re.Match[str]) -> str:
        name = m.group(0)
        if "." in name and name not in dims:
            raise LookupError(name)
        got = dims[name] if "." in name else env.get(name, name)
        return got if re.fullmatch(r"\w+", got) else f"({got})"

    try:
        return _IDENT.sub(sub, value)
    except LookupError:
        return None
