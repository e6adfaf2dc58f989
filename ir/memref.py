"""The memory-reference model: one access, whatever its spelling, and the memory it reaches."""

from __future__ import annotations

from dataclasses import dataclass

import tree_sitter as ts
from ktx.ir.affine_form import Affine
from ktx.ir.facts.kinds import AccessKind


@dataclass(frozen=True)
class MemRef:
    """One memory access, whatever its spelling, resolved to the memory it reaches.

    ``root`` is a kernel parameter, ``__shared__`` array or local array (``""`` when the
    pointer's origin is unknown). ``index`` is the first root element the access touches: for
    ``x[i]`` on a ``float*`` root it is ``i``; for ``reinterpret_cast<float4*>(x)[i]`` it is
    ``4*i``, with ``unit_type`` ``float4`` and ``width`` 4 (root elements per access; None
    when a size is not known, and then ``index`` is None too). Through a local pointer
    (``row = x + r * C; row[i]``) the index includes the pointer's offset: ``C*r + i``.
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
    """The subscript, dereference or intrinsic call."""
    line: int

    @property
    def reads(self) -> bool:
        return self.kind in ("load", "update", "address")

    @property
    def writes(self) -> bool:
        return self.kind in ("store", "update", "address")
