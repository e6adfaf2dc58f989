"""``ktx init``: draft a kernel folder's ``ktx.toml`` from the CUDA source.

Writing a spec by hand (every argument's dtype, shape and role, the launch translated from the
launcher, shapes, a reference) is the first hour a new user spends; most of it is in the file.
This package reads it from there, syntactically (the reading itself is the facts layer's:
:mod:`ktx.ir.facts.launcher`, :mod:`ktx.ir.facts.params`, :mod:`ktx.ir.facts.dtypes`):

* ``[[args]]`` from the kernel's signature: element types to dtypes (through template arguments
  of the launch and ``typedef``/``#define`` in the file and its local headers), pointers to
  arrays, the role from what the kernel reads and writes (``const`` is ``in``; a subscript that
  is stored to and loaded is ``inout``), scalars bound to the launcher's argument expressions;
* an array's extent from how it is indexed: ``p[i]`` under ``if (i < n)`` is ``[n]``,
  ``row = p + r * c; row[j]`` with ``j < c`` and ``r < rows`` is ``[rows, c]``;
* ``[launch]`` from the host launch site (:func:`ktx.ir.launch.mapping_from_file`, which follows
  locals and macros as ``ktx inspect`` does); when the launcher is itself called in the file
  with expressions of its caller's parameters (llm.c's ``gelu_forward1(out, inp, B * T * C,
  ...)``), those parameters become the shape variables and the launcher's ones ``[vars]``;
* ``[shapes]`` from integer locals of ``main`` with the shape variables' names, else a small
  default set.

What it cannot tell becomes a ``# TODO:`` line naming what is missing and where it looked, with a
placeholder that the spec loader refuses, so a draft with TODOs never runs by accident;
:func:`check` lists the TODOs that block a run.

Modules: :mod:`~ktx.draft.drafter` writes the spec, :mod:`~ktx.draft.sizing` picks default
shapes, :mod:`~ktx.draft.review` checks the draft as ``--check`` would,
:mod:`~ktx.draft.entries` holds what a draft is made of.
"""

from ktx.draft.drafter import draft
from ktx.draft.entries import Draft
from ktx.draft.review import check

__all__ = ["Draft", "check", "draft"]
