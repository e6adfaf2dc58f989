"""Inputs, references and comparisons for verification, on the device or on a CPU.

Verification draws fresh seeded inputs for every round and shape, so that a candidate must
compute the same function on any valid input (not one lucky buffer); outputs are poisoned
before each run, so an element a kernel forgets to write shows up as NaN (or bytes that change
between rounds). Drawing, encoding and comparing take ``xp``, the array module: the GPU worker
passes cupy, so nothing of the size of a buffer crosses to the host; CPU tests pass numpy and
run the same code.
"""

from __future__ import annotations

import importlib.util
import math
import sys
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from ktx.ir.errors import KtxError, Location
from ktx.ir.expr import Value

from ktx.dtypes import decode, encode, fp8_order, poison
from ktx.measure.argpack import struct_values
from ktx.spec import Arg, ShapePoint, Spec, Tolerance

Array = npt.NDArray[Any]


def round_seed(spec: Spec, point: ShapePoint, round_index: int) -> int:
    """A seed that differs per round and per shape, yet replays identically."""
    return zlib.crc32(f"{spec.verify.seed}:{round_index}:{point.name}".encode())


class Draws:
    """Seeded draws from numpy's generator on the host or CuPy's on the device.

    The two modules spell their generators differently; this gives both the few float32 /
    float64 / integer draws the spec's distributions need. Values differ between the two
    generators (so caches keyed by a seed also name the module), never between runs of one.
    """

    def __init__(self, seed: int, xp: Any = np) -> None:
        self.xp = xp
        self.device = xp is not np
        self._rng: Any = xp.random.RandomState(seed) if self.device else np.random.default_rng(seed)

    def normal(self, dims: tuple[int, ...], dtype: Any) -> Any:
        return self._rng.standard_normal(dims, dtype=dtype)

    def uniform(self, dims: tuple[int, ...], dtype: Any) -> Any:
        if self.device:
            return self._rng.random_sample(dims, dtype=dtype)
        return self._rng.random(dims, dtype=dtype)

    def integers(self, low: int, high: int, dims: tuple[int, ...]) -> Any:
        if self.device:
            return self._rng.randint(low, high, dims, dtype=self.xp.int64)
        return self._rng.integers(low, high, dims)

    def distinct(self, low: int, high: int, count: int) -> Any:
        """``count`` different integers from ``[low, high)``, in random order."""
        return self._rng.permutation(high - low)[:count] + low


def draw(
    arg: Arg,
    dims: tuple[int, ...],
    rng: np.random.Generator | Draws,
    xp: Any = np,
    env: Mapping[str, Value] | None = None,
) -> Any:
    """Values for an input argument, encoded to its storage dtype (on the device with cupy).
    ``env`` (the shape) gives an ``int:LOW..HIGH`` range its ends; without it (priming CuPy's
    kernels on tiny arrays) the range is ``[0, 1)``."""
    draws = rng if isinstance(rng, Draws) else _host_draws(rng)
    dist = arg.dist
    if dist.bounds is not None:
        count = int(np.prod(dims))
        low, high = dist.range(env, count) if env is not None else (0, 1)
        if dist.kind == "distinct" and env is not None:
            picked = draws.distinct(low, high, count).reshape(dims)
        else:
            picked = draws.integers(low, high, dims)
        return encode(picked.astype(xp.float64), arg.dtype, xp)
    # float32 draws: twice as fast as float64, and every device type is at most 32 bits wide
    # except fp64, which gets float64 draws.
    wide = arg.dtype.name == "fp64"
    ftype = xp.float64 if wide else xp.float32
    if dist.kind == "normal":
        std, mean = ftype(dist.param("std")), ftype(dist.param("mean"))
        values: Any = draws.normal(dims, ftype) * std + mean
    elif dist.kind == "uniform":
        low, high = ftype(dist.param("low")), ftype(dist.param("high"))
        values = draws.uniform(dims, ftype) * (high - low) + low
    elif dist.kind == "randint":
        values = draws.integers(int(dist.param("low")), int(dist.param("high")), dims).astype(xp.float64)
    else:  # arange
        count = int(np.prod(dims))
        values = (dist.param("start") + dist.param("step") * xp.arange(count)).reshape(dims)
    for name, special in (("inf_fraction", np.inf), ("neginf_fraction", -np.inf)):
        frac = dist.param(name)
        if frac > 0:
            values = xp.where(draws.uniform(dims, xp.float32) < frac, special, values).astype(values.dtype)
    if arg.dtype.kind == "bool":
        return xp.asarray(values != 0)
    return encode(values, arg.dtype, xp)


class _HostDraws(Draws):
    def __init__(self, rng: np.random.Generator) -> None:
        self.xp = np
        self.device = False
        self._rng = rng


def _host_draws(rng: np.random.Generator) -> Draws:
    return _HostDraws(rng)


def scalars(spec: Spec, env: Mapping[str, Value]) -> dict[str, Value]:
    """Values of the by-value arguments at ``env``."""
    out: dict[str, Value] = {}
    for arg in spec.args:
        if arg.value is not None:
            value = arg.value.evaluate(env)
            out[arg.name] = float(value) if arg.dtype.kind == "float" else int(value)
    return out


def host_inputs(spec: Spec, point: ShapePoint, seed: int) -> dict[str, Array]:
    """Storage arrays for every array argument: drawn values for in/inout, poison for out."""
    result: dict[str, Array] = seeded_inputs(spec, point, seed)
    return result


def seeded_inputs(
    spec: Spec, point: ShapePoint, seed: int, round_index: int = 0, xp: Any = np
) -> dict[str, Any]:
    """Every array argument at ``point`` in ``xp``'s memory: in/inout drawn from ``seed``, out
    filled with round ``round_index``'s poison."""
    env = spec.env(point)
    draws = Draws(seed, xp)
    arrays: dict[str, Any] = {}
    for arg in spec.all_args:  # the [[buffers]] too
        if not arg.is_array:
            continue
        dims = arg.dims(env)
        if arg.is_struct:  # an array of structs: its bytes, from the fields (never drawn)
            from ktx.measure.argpack import pack_array, struct_layouts  # libclang: only when needed

            layout = struct_layouts(spec, env)[arg.name]
            arrays[arg.name] = xp.asarray(pack_array(arg, layout, env))
        elif arg.role == "out":
            arrays[arg.name] = poison(dims, arg.dtype, round_index, xp)
        else:
            arrays[arg.name] = draw(arg, dims, draws, xp, env)
    return arrays


def load_python_reference(spec: Spec) -> Callable[..., Mapping[str, Any]]:
    """Import ``module:function`` from the kernel folder (not from ``sys.path``)."""
    assert spec.reference.python is not None
    module_name, _, func_name = spec.reference.python.partition(":")
    path = spec.folder / f"{module_name.replace('.', '/')}.py"
    unique = f"ktx_reference_{spec.name}_{module_name.replace('.', '_')}"
    mod_spec = importlib.util.spec_from_file_location(unique, path)
    if mod_spec is None or mod_spec.loader is None:
        raise KtxError(f"cannot import {path}", Location(str(spec.path)))
    module = importlib.util.module_from_spec(mod_spec)
    sys.modules[unique] = module
    mod_spec.loader.exec_module(module)
    fn = getattr(module, func_name, None)
    if not callable(fn):
        raise KtxError(f"{path} has no function {func_name!r}", Location(str(spec.path)))
    result: Callable[..., Mapping[str, Any]] = fn
    return result


def python_reference(
    spec: Spec, point: ShapePoint, inputs: Mapping[str, Array], fn: Callable[..., Mapping[str, Any]]
) -> dict[str, Array]:
    """Run the float64 reference on the decoded inputs; returns float64 outputs by name."""
    env = spec.env(point)
    decoded: dict[str, Any] = dict(struct_values(spec, env))  # a struct as {field path: value}
    for arg in spec.all_args:
        # Pure outputs are what the reference computes: the device-side check does not copy
        # them to the host, so they are absent here (and a reference must not read them).
        if arg.is_array and not arg.is_struct and (arg.role != "out" or arg.name in inputs):
            decoded[arg.name] = decode(inputs[arg.name], arg.dtype)
    decoded.update(scalars(spec, env))
    decoded.update({arg.name: None for arg in spec.args if arg.null})  # null pointers
    result = fn(decoded, dict(env))
    out: dict[str, Array] = {}
    for arg in spec.all_args:
        if not arg.is_output:
            continue
        if arg.name not in result:
            raise KtxError(
                f"python reference {spec.reference.python} returned no {arg.name!r}",
                Location(str(spec.path)),
                f"return a dict with keys {', '.join(a.name for a in spec.all_args if a.is_output)}",
            )
        value = np.asarray(result[arg.name], dtype=np.float64)
        want = arg.dims(env)
        if value.size != int(np.prod(want)):
            raise KtxError(
                f"python reference output {arg.name!r} has shape {value.shape}, expected {want}",
                Location(str(spec.path)),
            )
        out[arg.name] = value.reshape(want)
    return out


@dataclass(frozen=True)
class Comparison:
    ok: bool
    message: str = ""
    max_abs_err: float = 0.0
    rel_err: float = 0.0


def _index(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(flat, shape)) if shape else ()


def compare(
    arg: Arg, got_stored: Any, want: Any, tol: Tolerance, want_is_stored: bool, xp: Any = np
) -> Comparison:
    """Compare one output where its arrays live (``xp``: numpy, or cupy on the device). ``want``
    is a storage array (reference kernel) or float64 values (Python reference); both are brought
    to a common form first. Only scalars (counts, the largest error, the first bad element)
    leave the device.

    Floats pass when every element is within ``atol + rtol * |want|`` and the largest error is
    at most ``max_abs``; a NaN or infinity where the reference has a finite value fails. fp8
    outputs compare codes, at most ``ulp`` apart. Integers compare exactly (within ``atol``).
    """
    shape = tuple(got_stored.shape)
    # Bit-identical (the usual case against the original kernel) passes under every rule below
    # (NaN bits equal NaN bits: a NaN where the reference has one matches), so needs no arithmetic.
    if want_is_stored and got_stored.dtype == want.dtype and bool(xp.array_equal(got_stored, want)):
        return Comparison(True, "", 0.0, 0.0)
    if arg.dtype.kind == "fp8":
        want_codes = want if want_is_stored else encode(want, arg.dtype, xp)
        got_v = decode(got_stored, arg.dtype, xp)
        want_v = decode(want_codes, arg.dtype, xp)
        got_nan, want_nan = xp.isnan(got_v), xp.isnan(want_v)
        dist = xp.abs(fp8_order(got_stored, xp) - fp8_order(want_codes, xp))
        bad = (got_nan != want_nan) | (~want_nan & (dist > tol.ulp))
        err = xp.where(got_nan | want_nan, 0.0, xp.abs(got_v - want_v))
        return _result(arg, bad, got_v, want_v, err, shape, f"more than {tol.ulp} ulp apart", xp)
    got = decode(got_stored, arg.dtype, xp)
    ref = decode(want, arg.dtype, xp) if want_is_stored else xp.asarray(want, dtype=xp.float64)
    if arg.dtype.kind == "float" and bool(xp.isfinite(ref).all()) and bool(xp.isfinite(got).all()):
        return _finite_compare(arg, got, ref, tol, shape, xp)
    finite = xp.isfinite(ref)
    with np.errstate(invalid="ignore"):
        err = xp.where(finite, xp.abs(got - ref), 0.0)
    err = xp.where(xp.isnan(err), xp.inf, err)
    limit = tol.atol + tol.rtol * xp.abs(xp.where(finite, ref, 0.0))
    nonfinite_match = xp.where(xp.isnan(ref), xp.isnan(got), got == ref)
    bad = xp.where(finite, ~(err <= limit), ~nonfinite_match)
    why = f"beyond atol={tol.atol:g} + rtol={tol.rtol:g}*|want|"
    result = _result(arg, bad, got, ref, err, shape, why, xp)
    if result.ok and result.max_abs_err > tol.max_abs:
        flat = int(xp.argmax(err))
        return Comparison(
            False,
            f"{arg.name}: max abs error {result.max_abs_err:.4g} exceeds the cap {tol.max_abs:g} "
            f"at {_index(flat, shape)} (got {float(got.ravel()[flat]):.6g}, "
            f"want {float(ref.ravel()[flat]):.6g})",
            result.max_abs_err,
            result.rel_err,
        )
    return result


def compare_output(
    arg: Arg,
    got: Mapping[str, Any],
    want: Mapping[str, Any],
    tol: Tolerance,
    want_is_stored: bool,
    spec: Spec,
    xp: Any = np,
) -> Comparison:
    """:func:`compare` for output ``arg`` of ``got`` and ``want`` (every output by name), in
    the order the spec asks (:attr:`Arg.order`). In order: element by element. As a multiset:
    both sides are put in a canonical order first (sorted by value; within a row; or within the
    group each element's value of the grouping output names, groups in key order), then compared
    element by element under the same tolerance. So a candidate that writes the same values in
    another order passes, and one that writes another multiset (a value lost, duplicated or
    changed, or moved to another group) still fails."""
    group = arg.order_group
    if group is None:
        return compare(arg, got[arg.name], want[arg.name], tol, want_is_stored, xp)
    got_s, want_s = got[arg.name], want[arg.name]
    got_v = decode(got_s, arg.dtype, xp)
    want_v = decode(want_s, arg.dtype, xp) if want_is_stored else xp.asarray(want_s, dtype=xp.float64)
    shape = tuple(got_s.shape)
    if group == "row" and len(shape) > 1:
        g_perm, w_perm = xp.argsort(got_v, axis=-1), xp.argsort(want_v, axis=-1)
        got_c = xp.take_along_axis(got_s, g_perm, axis=-1)
        want_c = xp.take_along_axis(want_s, w_perm, axis=-1)
    elif group in ("*", "row"):
        got_c = got_s.ravel()[xp.argsort(got_v.ravel())].reshape(shape)
        want_c = xp.asarray(want_s).ravel()[xp.argsort(want_v.ravel())].reshape(shape)
    else:
        key = next(a for a in spec.all_args if a.name == group)
        got_k = decode(got[group], key.dtype, xp)
        want_k = (decode(want[group], key.dtype, xp) if want_is_stored
                  else xp.asarray(want[group], dtype=xp.float64))  # fmt: skip
        g_perm, w_perm = _grouped_order(got_k, got_v, xp), _grouped_order(want_k, want_v, xp)
        if not bool(xp.array_equal(got_k.ravel()[g_perm], want_k.ravel()[w_perm])):
            return Comparison(False, f"{arg.name}: its groups by {group} differ in size or key "
                              f"(as multisets per {group})", math.inf, math.inf)  # fmt: skip
        got_c = got_s.ravel()[g_perm].reshape(shape)
        want_c = xp.asarray(want_s).ravel()[w_perm].reshape(shape)
    result = compare(arg, got_c, want_c, tol, want_is_stored, xp)
    if result.ok:
        return result
    return Comparison(False, f"{result.message} (compared as {arg.order}: positions after sorting)",
                      result.max_abs_err, result.rel_err)  # fmt: skip


def _grouped_order(keys: Any, values: Any, xp: Any) -> Any:
    """A permutation of the flattened elements: by group key, then by value within a group. One
    integer sort key (group index * n + value rank) works alike in numpy and cupy, with no
    lexsort (cupy's takes no NaN); ties between equal values are in any order, which changes
    nothing, as their values are equal."""
    flat_v = values.ravel()
    n = int(flat_v.size)
    if n == 0:
        return xp.zeros(0, dtype=xp.int64)
    rank = xp.empty(n, dtype=xp.int64)
    rank[xp.argsort(flat_v)] = xp.arange(n, dtype=xp.int64)
    _, group = xp.unique(keys.ravel(), return_inverse=True)
    return xp.argsort(group.ravel().astype(xp.int64) * n + rank)


def _square_sum(a: Any, xp: Any) -> float:
    """``sum(a * a)``: a dot product on the host (no temporary), the elementwise kernels the
    worker primes on the device (a dot would start cuBLAS inside the first timed request)."""
    flat = a.ravel()
    return float(xp.dot(flat, flat)) if xp is np else float(xp.sum(flat * flat))


def _finite_compare(
    arg: Arg, got: Any, ref: Any, tol: Tolerance, shape: tuple[int, ...], xp: Any
) -> Comparison:
    """:func:`compare`'s rules where every value on both sides is finite (the usual case): no
    masks for NaN and infinity, and the signed difference is kept once for the error, the
    tolerance test and the relative norm, so the float64 passes over the buffer drop from
    about twenty to about eight (issue 23 item 6: 2.5 s a round for 25M floats on a CPU)."""
    d = got - ref
    err = xp.abs(d)
    bad = err > tol.atol + tol.rtol * xp.abs(ref)
    max_abs = float(err.max()) if err.size else 0.0
    norm, diff = math.sqrt(_square_sum(ref, xp)), math.sqrt(_square_sum(d, xp))
    rel = diff / norm if norm > 0 else diff
    count = int(xp.count_nonzero(bad))
    why = f"beyond atol={tol.atol:g} + rtol={tol.rtol:g}*|want|"
    if count:
        flat = int(xp.argmax(bad.ravel().astype(xp.int8)))  # the first True
        g, wv = float(got.ravel()[flat]), float(ref.ravel()[flat])
        return Comparison(
            False,
            f"{arg.name}: {count} of {bad.size} elements differ ({why}); first at "
            f"{_index(flat, shape)}: got {g:.6g}, want {wv:.6g}",
            max_abs,
            rel,
        )
    if max_abs > tol.max_abs:
        flat = int(xp.argmax(err))
        return Comparison(
            False,
            f"{arg.name}: max abs error {max_abs:.4g} exceeds the cap {tol.max_abs:g} "
            f"at {_index(flat, shape)} (got {float(got.ravel()[flat]):.6g}, "
            f"want {float(ref.ravel()[flat]):.6g})",
            max_abs,
            rel,
        )
    return Comparison(True, "", max_abs, rel)


def _result(
    arg: Arg, bad: Any, got: Any, want: Any, err: Any, shape: tuple[int, ...], why: str, xp: Any = np
) -> Comparison:
    """The verdict from the elementwise ``bad`` mask: counts and norms reduced where the arrays
    are, then the first bad element (by flat index) fetched for the message."""
    infinite = bool(xp.isinf(err).any())
    max_abs = float("inf") if infinite else float(err.max()) if err.size else 0.0
    both = xp.isfinite(want) & xp.isfinite(got)
    w = xp.where(both, want, 0.0)
    d = xp.where(both, got, 0.0) - w
    norm = float(xp.sqrt(xp.sum(w * w)))
    diff = float(xp.sqrt(xp.sum(d * d)))
    rel = diff / norm if norm > 0 else diff
    count = int(xp.count_nonzero(bad))
    if count == 0:
        return Comparison(True, "", max_abs, rel)
    flat = int(xp.argmax(bad.ravel().astype(xp.int8)))  # the first True
    g, wv = float(got.ravel()[flat]), float(want.ravel()[flat])
    kind = "NaN/Inf where the reference has none" if not math.isfinite(g) and math.isfinite(wv) else why
    message = (
        f"{arg.name}: {count} of {bad.size} elements differ ({kind}); first at "
        f"{_index(flat, shape)}: got {g:.6g}, want {wv:.6g}"
    )
    return Comparison(False, message, max_abs, rel)
