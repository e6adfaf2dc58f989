"""The affine form algebra: an index as a sum of integer-weighted products of symbols.

:class:`Affine` is what :mod:`ktx.ir.affine` reads every index into; it knows nothing of the
tree (:mod:`ktx.ir.kernel_index` reads expressions into it), so that bounds, owners and the
passes can compare, substitute and take coefficients of indices without re-reading source.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

# -- symbols -------------------------------------------------------------------------------------

TID_X, TID_Y, TID_Z = "threadIdx.x", "threadIdx.y", "threadIdx.z"
BID_X, BID_Y, BID_Z = "blockIdx.x", "blockIdx.y", "blockIdx.z"
BDIM_X, BDIM_Y, BDIM_Z = "blockDim.x", "blockDim.y", "blockDim.z"
GDIM_X, GDIM_Y, GDIM_Z = "gridDim.x", "gridDim.y", "gridDim.z"
BUILTINS = frozenset({"threadIdx", "blockIdx", "blockDim", "gridDim"})
#: Builtins that differ between the threads of one launch.
THREAD_VARYING = frozenset({TID_X, TID_Y, TID_Z, BID_X, BID_Y, BID_Z})

Monomial = tuple[str, ...]


@dataclass(frozen=True)
class Affine:
    """``sum(coef * product(symbols)) + const``: an index over symbols, with integer weights.

    Strictly a polynomial (``blockIdx.x * blockDim.x`` is a product of two symbols); it is
    *affine in* a symbol when that symbol appears at most to the first power and never inside
    an atom, and then :meth:`coeff` gives its (possibly symbolic) coefficient. Atoms are
    opaque sub-expressions (``(i / C)``), named by their text, with the symbols they depend on
    in ``atoms``.

    >>> a = Affine.sym("blockIdx.x") * Affine.sym("blockDim.x") + Affine.sym("threadIdx.x")
    >>> str(a), str(a.coeff("blockIdx.x")), a.coeff("threadIdx.x").const
    ('blockDim.x*blockIdx.x + threadIdx.x', 'blockDim.x', 1)
    >>> (a * Affine.of(4)).coeff("threadIdx.x").const, (a * a).coeff("threadIdx.x") is None
    (4, True)
    """

    terms: tuple[tuple[Monomial, int], ...] = ()
    atoms: tuple[tuple[str, frozenset[str]], ...] = ()

    # construction
    @staticmethod
    def of(value: int) -> Affine:
        return Affine((((), value),) if value else ())

    @staticmethod
    def sym(name: str) -> Affine:
        return Affine((((name,), 1),))

    @staticmethod
    def atom(name: str, deps: Iterable[str]) -> Affine:
        return Affine((((name,), 1),), ((name, frozenset(deps)),))

    @staticmethod
    def _make(terms: Mapping[Monomial, int], atoms: Mapping[str, frozenset[str]]) -> Affine:
        kept = tuple(sorted((m, c) for m, c in terms.items() if c))
        used = {s for m, _ in kept for s in m}
        return Affine(kept, tuple(sorted((a, d) for a, d in atoms.items() if a in used)))

    def _dicts(self) -> tuple[dict[Monomial, int], dict[str, frozenset[str]]]:
        return dict(self.terms), dict(self.atoms)

    # arithmetic
    def __add__(self, other: Affine) -> Affine:
        terms, atoms = self._dicts()
        for m, c in other.terms:
            terms[m] = terms.get(m, 0) + c
        atoms.update(other.atoms)
        return Affine._make(terms, atoms)

    def __neg__(self) -> Affine:
        return Affine(tuple((m, -c) for m, c in self.terms), self.atoms)

    def __sub__(self, other: Affine) -> Affine:
        return self + (-other)

    def __mul__(self, other: Affine) -> Affine:
        terms: dict[Monomial, int] = {}
        for m1, c1 in self.terms:
            for m2, c2 in other.terms:
                m = tuple(sorted(m1 + m2))
                terms[m] = terms.get(m, 0) + c1 * c2
        atoms = dict(self.atoms)
        atoms.update(other.atoms)
        return Affine._make(terms, atoms)

    # questions
    @property
    def const(self) -> int:
        """The constant term."""
        return dict(self.terms).get((), 0)

    @property
    def is_const(self) -> bool:
        return all(not m for m, _ in self.terms)

    @property
    def symbols(self) -> frozenset[str]:
        """Symbols named at the top level (atoms count as their own names)."""
        return frozenset(s for m, _ in self.terms for s in m)

    @property
    def free(self) -> frozenset[str]:
        """Every symbol the value depends on, atoms opened."""
        deps = dict(self.atoms)
        out: set[str] = set()
        for s in self.symbols:
            out |= deps.get(s, frozenset({s}))
        return frozenset(out)

    def depends_on(self, names: Iterable[str]) -> bool:
        return bool(self.free & frozenset(names))

    def coeff(self, name: str) -> Affine | None:
        """The coefficient of ``name`` when the value is affine in it, else None (0 when absent)."""
        if any(name in deps for _, deps in self.atoms):
            return None
        terms: dict[Monomial, int] = {}
        for m, c in self.terms:
            k = m.count(name)
            if k > 1:
                return None
            if k == 1:
                rest = list(m)
                rest.remove(name)
                terms[tuple(rest)] = terms.get(tuple(rest), 0) + c
        return Affine._make(terms, dict(self.atoms))

    def without(self, *names: str) -> Affine:
        """The terms that mention none of ``names`` (the offset once their part is removed)."""
        terms = {m: c for m, c in self.terms if not set(m) & set(names)}
        return Affine._make(terms, dict(self.atoms))

    def substitute(self, name: str, value: Affine) -> Affine:
        out = Affine()
        for m, c in self.terms:
            part = Affine.of(c)
            for s in m:
                part = part * (value if s == name else Affine((((s,), 1),), self.atoms))
            out = out + part
        return out

    def equals(self, other: Affine) -> bool:
        return self.terms == other.terms

    def is_sym(self, name: str) -> bool:
        """Whether the value is exactly ``name``."""
        return self.terms == (((name,), 1),)

    def __str__(self) -> str:
        """C-like text (symbols and atoms as written); ``0`` for zero."""
        parts: list[str] = []
        for m, c in self.terms:
            body = "*".join(m)
            if not m:
                word = str(abs(c))
            elif abs(c) == 1:
                word = body
            else:
                word = f"{abs(c)}*{body}"
            if not parts:
                parts.append(word if c > 0 else f"-{word}")
            else:
                parts.append(f"+ {word}" if c > 0 else f"- {word}")
        return " ".join(parts) if parts else "0"


ZERO = Affine()
