"""Guard zones: every buffer a verification launch sees sits between two poisoned regions.

Comparing outputs with the original's cannot see a write past a buffer's end: it lands in
whatever lies next to the buffer (another output, an allocator's free block) and nobody looks
there. So each verification launch gets its buffers as views into larger allocations, with
:data:`GUARD_BYTES` of a known byte pattern before and after; after the launch the guards are
compared with the pattern *where the arrays are* (on the device under CuPy), and only one small
vector of first offsets comes back to the host.

A guard that changed is a failure naming the buffer, the side and the first element written:
``out: wrote past its end (first at element 16,777,216 + 3)``. For a candidate that is a
``wrong_result`` (never dispatched); for the original kernel it is a *spec error*: the spec
gives a buffer fewer elements than the kernel writes, so every comparison against it is void
(see :func:`fault_message`, and the harness, which then measures no candidate at that shape).

The original is also held to writing what the spec says it writes: an ``out`` buffer it leaves
entirely at its poison (an input declared ``out``: issue 21) would make every candidate "match",
so that too is a spec error (:func:`untouched_outputs`, confirmed by a second launch with the
poison's bytes inverted), raised before any candidate is measured at that shape.

The same code runs with numpy as the array module (the CPU tests, the fake GPU worker).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ktx.spec import Arg, ShapePoint, Spec

#: Bytes of poison before and after each buffer: at least 4 KiB, and a multiple of 256 so that
#: a buffer keeps the alignment of its allocation (CuPy's are 512-byte aligned; a vectorized
#: candidate needs 16 bytes).
GUARD_BYTES = 4096
ALIGN = 256
#: Messages of an original kernel's guard violation, or of an output it never wrote, start with
#: this (the harness and the commands recognise a spec error by it).
SPEC_ERROR = "spec error:"


def guard_bytes(minimum: int = GUARD_BYTES, align: int = ALIGN) -> int:
    """``minimum`` rounded up to a multiple of ``align``."""
    return -(-max(minimum, 1) // align) * align


def pattern(xp: Any, nbytes: int = GUARD_BYTES) -> Any:
    """The guard poison: byte ``i`` is ``(0x5B + 0x9D * i) mod 256``, which runs through every
    byte value (0x9D is odd), so a stray store of any constant differs from it somewhere, and
    no 2-byte or wider store reproduces it by chance as a single-byte poison might."""
    return ((xp.arange(nbytes, dtype=xp.uint32) * 0x9D + 0x5B) & 0xFF).astype(xp.uint8)


@dataclass(frozen=True)
class GuardedBuffer:
    """One array between two guards: ``view`` is what the kernel gets, ``base`` the allocation."""

    name: str
    base: Any  # uint8: guard | data | guard
    view: Any  # the array, in its dtype and shape
    before: int  # bytes of guard before the data
    nbytes: int
    itemsize: int

    @property
    def count(self) -> int:
        return self.nbytes // max(1, self.itemsize)


def guarded_copy(name: str, array: Any, poison: Any, xp: Any) -> GuardedBuffer:
    """A copy of ``array`` between two poisoned guards of ``len(poison)`` bytes each."""
    guard = int(poison.size)
    nbytes = int(array.nbytes)
    base = xp.empty(2 * guard + nbytes, dtype=xp.uint8)
    base[:guard] = poison
    base[guard + nbytes :] = poison
    view = base[guard : guard + nbytes].view(array.dtype).reshape(array.shape)
    view[...] = array
    return GuardedBuffer(name, base, view, guard, nbytes, int(array.dtype.itemsize))


@dataclass(frozen=True)
class GuardViolation:
    """A changed guard: ``offset`` is the first changed byte past the end (``after``) or the
    nearest changed byte before the start, counted back from it (``before``, 1 = the byte just
    before the first element)."""

    name: str
    side: str  # "after" | "before"
    offset: int
    itemsize: int
    count: int

    @property
    def element(self) -> int:
        """Elements past the end (0: the element just past it), or before the start (1: the
        element just before the first)."""
        if self.side == "after":
            return self.offset // self.itemsize
        return -(-self.offset // self.itemsize)

    @property
    def message(self) -> str:
        if self.side == "after":
            return f"{self.name}: wrote past its end (first at element {self.count:,} + {self.element})"
        return f"{self.name}: wrote before its start (first at element -{self.element})"


def check(buffers: Sequence[GuardedBuffer], poison: Any, xp: Any) -> list[GuardViolation]:
    """The guards that changed. Compared on the device: per guard, whether it differs and where
    (one reduction each), gathered into one small vector that is the only thing copied back."""
    if not buffers:
        return []
    guard = int(poison.size)
    firsts = []
    for buf in buffers:
        # 0/1 bytes, nearest to the data first (argmax of a bool array is not in every xp)
        before = (buf.base[: buf.before][::-1] != poison[::-1]).astype(xp.uint8)
        end = buf.before + buf.nbytes
        after = (buf.base[end : end + guard] != poison).astype(xp.uint8)
        # any() * (argmax + k) - 1: -1 where the guard is intact, without a branch on the host
        firsts.append(before.any() * (xp.argmax(before) + 2) - 1)
        firsts.append(after.any() * (xp.argmax(after) + 1) - 1)
    found = xp.stack(firsts)
    offsets = [int(v) for v in (found.get() if hasattr(found, "get") else found).tolist()]
    out = []
    for i, buf in enumerate(buffers):
        for side, offset in (("before", offsets[2 * i]), ("after", offsets[2 * i + 1])):
            if offset >= 0:
                out.append(GuardViolation(buf.name, side, offset, buf.itemsize, buf.count))
    return out


def fault_message(spec: Spec, point: ShapePoint, found: Sequence[GuardViolation], original: bool) -> str:
    """What a guard violation says: for a candidate, where it wrote; for the original, that the
    spec is wrong, which extent is too small (with its ``ktx.toml`` line) and what to fix."""
    what = "; ".join(v.message for v in found)
    if not original:
        return f"shape {point.name}: {what}"
    args = {a.name: a for a in spec.all_args}
    env = spec.env(point)
    extents = []
    for name in dict.fromkeys(v.name for v in found):
        arg = args.get(name)
        if arg is not None:
            extents.append(_extent_text(spec, arg, env))
    return (
        f"{SPEC_ERROR} the original kernel writes outside its buffers at {point.name}: {what}. "
        + " ".join(extents)
        + " ktx measures nothing against an original that writes out of bounds: make each such "
        "[[args]] shape cover every element the kernel writes (or fix [launch] if it launches "
        "more threads than the kernel expects)"
    )


def _extent_text(spec: Spec, arg: Arg, env: Mapping[str, Any]) -> str:
    exprs = ", ".join(e.text.strip() for e in arg.shape)
    try:
        dims = ", ".join(str(d) for d in arg.dims(env))
    except Exception:
        dims = "?"
    where = f"{arg.where}: " if arg.where is not None else f"{spec.path}: "
    return f"{where}[[args]] {arg.name} shape = [{exprs}] = [{dims}] is too small."


def is_spec_error(message: str) -> bool:
    """Whether a failure message is a spec error of the original: a write out of bounds, or a
    declared output it leaves unwritten."""
    return SPEC_ERROR in message


class GuardFault(Exception):
    """Raised by :func:`run_guarded` when a guard changed; ``message`` says where."""

    def __init__(self, message: str, found: Sequence[GuardViolation]) -> None:
        super().__init__(message)
        self.message = message
        self.found = tuple(found)


def run_guarded(
    spec: Spec,
    point: ShapePoint,
    pristine: Mapping[str, Any],
    launch: Callable[[dict[str, Any]], None],
    xp: Any,
    original: bool = False,
) -> dict[str, Any]:
    """Launch (``launch(arrays)``, which waits for the kernel) on guarded copies of every array
    argument: the inout and (poisoned) out arrays fresh from ``pristine``, the inputs too (a
    candidate that writes to one corrupts only its own copy). Returns the outputs (views into
    the guarded allocations); raises :class:`GuardFault` when a guard changed."""
    poison = pattern(xp, guard_bytes())
    arrays = [a for a in spec.all_args if a.is_array]  # the [[buffers]] a struct points at too
    buffers = {a.name: guarded_copy(a.name, pristine[a.name], poison, xp) for a in arrays}
    launch({name: buf.view for name, buf in buffers.items()})
    found = check(list(buffers.values()), poison, xp)
    if found:
        raise GuardFault(fault_message(spec, point, found, original), found)
    outputs = {a.name: buffers[a.name].view for a in spec.all_args if a.is_output}
    if original:
        unwritten = untouched_outputs(spec, pristine, outputs, xp)
        if unwritten:
            unwritten = _confirm_unwritten(spec, pristine, unwritten, launch, poison, xp)
        if unwritten:
            raise GuardFault(unwritten_message(spec, point, unwritten), ())
    return outputs


def _confirm_unwritten(
    spec: Spec,
    pristine: Mapping[str, Any],
    suspects: Sequence[str],
    launch: Callable[[dict[str, Any]], None],
    guard: Any,
    xp: Any,
) -> list[str]:
    """The suspects the original leaves unwritten again when their poison is every byte
    inverted. A kernel may write the poison's own value (an int8 ``-1`` everywhere is round 0's
    ``0xFF``); it cannot write both a byte and its inverse, so an output equal to its poison in
    both launches was not written. The second launch runs only on such a suspicion."""
    flipped = dict(pristine)
    for name in suspects:
        a = pristine[name]
        flipped[name] = (
            xp.bitwise_not(xp.ascontiguousarray(a).reshape(-1).view(xp.uint8)).view(a.dtype).reshape(a.shape)
        )
    again = {a.name: guarded_copy(a.name, flipped[a.name], guard, xp) for a in spec.all_args if a.is_array}
    launch({name: buf.view for name, buf in again.items()})
    return untouched_outputs(spec, flipped, {name: again[name].view for name in suspects}, xp)


def untouched_outputs(spec: Spec, pristine: Mapping[str, Any], got: Mapping[str, Any], xp: Any) -> list[str]:
    """The ``out`` arguments whose every byte after the launch is still the poison they were
    filled with (``pristine``), compared where the arrays are; only a bool per output comes back.

    An original that leaves a declared output entirely at its poison does not write it: the
    spec's role is wrong (an input declared ``out``, issue 21) and every candidate, writing it or
    not, would "match" the original's poison. A single written element clears it; an empty
    buffer is never reported. A kernel may write the poison's own value, so this is a suspicion
    that :func:`run_guarded` confirms with a second launch before it calls it a spec error.
    """
    out = []
    for arg in spec.all_args:
        if arg.role != "out" or arg.name not in got:
            continue
        after, before = got[arg.name], pristine[arg.name]
        if int(after.size) == 0:
            continue
        same = xp.array_equal(
            xp.ascontiguousarray(after).reshape(-1).view(xp.uint8),
            xp.ascontiguousarray(before).reshape(-1).view(xp.uint8),
        )
        if bool(same):
            out.append(arg.name)
    return out


def unwritten_message(spec: Spec, point: ShapePoint, names: Sequence[str]) -> str:
    """The spec error for outputs the original never wrote: which, the ``ktx.toml`` line of each,
    and the question to answer (is it an input?)."""
    args = {a.name: a for a in spec.all_args}
    parts = []
    for name in names:
        arg = args[name]
        where = f"{arg.where}: " if arg.where is not None else f"{spec.path}: "
        parts.append(f'{where}[[args]] {name} is role = "out": is its role "in"?')
    listed = ", ".join(names)
    return (
        f"{SPEC_ERROR} the original kernel leaves {listed} entirely at its poison at {point.name}: "
        f"it never writes {'them' if len(names) > 1 else 'it'}, so every candidate would match. "
        + " ".join(parts)
        + " ktx measures nothing against an original that leaves a declared output unwritten: "
        "give each such argument the role the kernel gives it (in, or inout if it reads and writes it)"
    )


def spec_error_section(message: str) -> str:
    """The part of the spec a spec error points at: the role of an output the original never
    writes, else the extent of a buffer it writes past."""
    if "entirely at its poison" in message:
        return '[[args]] role (the output named above is never written; is it "in"?)'
    return "[[args]] shape (the extent named above is too small)"
