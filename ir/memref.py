"""The one memory-access model: :class:`MemRef`, an access and the memory it reaches.

Every analysis of memory in ktx returns these records, so that a pass asks one shape of
question whoever answered it:

* :meth:`ktx.ir.kernel_index.KernelIndex.accesses` reads every access of a kernel, whatever its
  spelling (subscripts, ``*p``, the ``__ldg``/``__stcs`` family, vector casts, local pointers),
  with its index as an :class:`~ktx.ir.affine_form.Affine` form in root elements;
  :attr:`ktx.ir.facts.kernel.Facts.refs` adds the element type and size with template
  parameters bound, whether the access is conditional in the kernel body, its may-alias class
  and its innermost loop;
* :func:`ktx.ir.access.analyze_loop` reads a loop's subscripts relative to the loop's variable
  (``stride``, ``offset``: what ``vectorize`` packs), and
  :func:`ktx.ir.facts.elements.element_accesses` those of a one-element-per-thread body
  relative to the element's index (with ``packable``).

Fields a producer does not compute keep their defaults (``stride`` None, ``span`` None...);
what each access *does* (``kind``) is :func:`ktx.ir.facts.kinds.access_kind`'s, everywhere.
:class:`Root` is the memory behind a pointer, and says whether two may alias.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import tree_sitter as ts
from ktx.ir.affine_form import Affine
from ktx.ir.facts.kinds import STORE_INTRINSICS, AccessKind
from ktx.ir.source import Span

Space = Literal["global", "shared", "local", "unknown"]


@dataclass(frozen=True)
class Root:
    """The memory a pointer reaches: a kernel parameter, a shared array, a local array.

    ``element_type`` is the pointee as written, qualifiers removed (``T``, ``float``);
    ``name`` is empty when the pointer's origin is unknown (then ``space`` is ``unknown``).
    """

    name: str
    space: Space
    restrict: bool
    const: bool
    element_type: str

    def may_alias(self, other: Root) -> bool:
        """Whether accesses through the two roots may touch the same bytes.

        >>> g = Root("a", "global", True, False, "float")
        >>> (g.may_alias(Root("b", "global", True, True, "float")),
        ...  g.may_alias(Root("b", "global", False, True, "float")),
        ...  g.may_alias(Root("s", "shared", True, False, "float")))
        (False, True, False)
        """
        if "unknown" in (self.space, other.space):
            return True
        if self.space != other.space:
            return False
        if self.name == other.name:
            return True
        if self.space in ("shared", "local"):
            return False
        return not (self.restrict and other.restrict)

    @property
    def alias_class(self) -> str:
        """``restrict:<p>`` (only ``p`` reaches it), ``global`` (parameters that are not
        ``__restrict__``: any two may alias), ``shared:<a>``, ``local:<a>``, or ``unknown``."""
        if not self.name or self.space == "unknown":
            return "unknown"
        if self.space in ("shared", "local"):
            return f"{self.space}:{self.name}"
        return f"restrict:{self.name}" if self.restrict else "global"


UNKNOWN = Root("", "unknown", False, False, "")


@dataclass(frozen=True)
class Term:
    """One additive term of an index: ``sign * node``."""

    sign: int
    node: ts.Node


@dataclass(frozen=True)
class MemRef:
    """One memory access, whatever its spelling, resolved to the memory it reaches.

    ``root`` is a kernel parameter, ``__shared__`` array or local array (``""`` when the
    pointer's origin is unknown), and ``memory`` what is known of it (:class:`Root`). ``index``
    is the first root element the access touches: for ``x[i]`` on a ``float*`` root it is
    ``i``; for ``reinterpret_cast<float4*>(x)[i]`` it is ``4*i``, with ``unit_type`` ``float4``
    and ``width`` 4 (root elements per access; None when a size is not known, and then
    ``index`` is None too). Through a local pointer (``row = x + r * C; row[i]``) the index
    includes the pointer's offset: ``C*r + i``.

    ``kind``: ``load`` (read, also ``__ldg(&p[i])`` and the other load intrinsics), ``store``
    (``p[i] = e``, ``__stcs(&p[i], v)``), ``update`` (``p[i] += e``, ``++p[i]``: read and
    written) or ``address`` (any other ``&p[i]``: treat as read and written). A store through
    an intrinsic cannot be moved by rewriting its subscript alone (the intrinsic's hint would
    be lost): :attr:`pinned` says so, and it counts as read too.
    """

    kind: AccessKind
    via: str
    """``subscript``, ``deref`` or the intrinsic's name (``__ldg``, ``__stcs``...)."""
    pointer: str
    """The pointer as written (``row``, ``reinterpret_cast<const float4*>(x)``)."""
    root: str
    index: Affine | None
    unit_type: str
    width: int | None
    node: ts.Node
    """The access: the subscript, the dereference, or the intrinsic call (the kernel-wide
    reader; the loop and element readers take a load intrinsic's whole call, so that replacing
    it replaces the load, and a store intrinsic's subscript)."""
    line: int
    span: Span | None = None
    """``node``'s span (None where a caller built the record by hand)."""
    memory: Root = UNKNOWN
    """The memory ``root`` names: its space, ``__restrict__``, ``const`` and element type as
    written."""
    element_type: str = ""
    """The root's element type with the kernel's template parameters bound where known
    (:attr:`ktx.ir.facts.kernel.Facts.refs`)."""
    element_size: int | None = None
    """``sizeof`` :attr:`element_type`, or None when not known (or not asked)."""
    conditional: bool = False
    """Under an ``if``, ``?:``, ``&&``/``||`` right operand, ``switch``, or a ``while``/``do``
    of the scope it was read in (the kernel body, the loop's body, the element's body)."""
    loop_label: str = ""
    """The innermost loop around it (``L3``), or ``''`` (:attr:`Facts.refs`)."""
    index_node: ts.Node | None = None
    """The subscript's index expression, as written."""
    stride: int | None = None
    """Relative to a loop or element variable: its coefficient in the index (1: contiguous; 0:
    the same element every iteration; None: not linear, or not read relative to one)."""
    offset: str | None = None
    """When ``stride == 1`` and the rest of the index does not mention the variable: that rest
    as source text (``''`` for none); else None."""
    offset_terms: tuple[Term, ...] = ()
    """The term nodes :attr:`offset` is made of."""
    loops: tuple[ts.Node, ...] = ()
    """The loops between the scope read and the access, outermost first."""
    packable: bool = False
    """Whether ``vectorize`` may take it in a pack (:func:`ktx.ir.facts.elements.element_accesses`)."""

    @property
    def intrinsic(self) -> str:
        """The intrinsic whose address argument this access is (``__ldg``, ``__stcs``), or ''."""
        return "" if self.via in ("subscript", "deref") else self.via

    @property
    def pinned(self) -> bool:
        """The access's address is used as such (``&p[i]``, ``__stcs(&p[i], v)``): a rewrite
        may not replace the element alone."""
        return self.kind == "address" or self.via in STORE_INTRINSICS

    @property
    def reads(self) -> bool:
        return self.kind in ("load", "update", "address") or self.pinned

    @property
    def writes(self) -> bool:
        return self.kind in ("store", "update", "address")

    @property
    def contiguous(self) -> bool:
        return self.stride == 1 and self.offset is not None

    @property
    def alias(self) -> str:
        """The may-alias class of its memory (:attr:`Root.alias_class`)."""
        return self.memory.alias_class
