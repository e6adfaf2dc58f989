"""Moved: the one-element-per-thread facts live in :mod:`ktx.ir.facts.elements`.

Only the two names ``coarsen`` imports stay here until it imports them from the facts layer.
"""

from __future__ import annotations

from ktx.ir.facts.elements import derived_locals, runs_before

__all__ = ["derived_locals", "runs_before"]
