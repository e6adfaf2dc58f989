"""Inputs, references and comparisons for verification: numpy only, testable on a CPU.

Verification draws fresh seeded inputs for every round and shape, so that a candidate must
compute the same function on any valid input (not one lucky buffer); outputs are poisoned
before each run, so an element a kernel forgets to write shows up as NaN (or 0xFF bytes).
"""

from __future__ import annotations

import importlib.util
import sys
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ktx.errors import KtxError, Location
from ktx.expr import Value
from ktx.measure.dtypes import decode, encode, fp8_order, poison
from ktx.spec import Arg, ShapePoint, Spec, Tolerance

Array = npt.NDArray[Any]


def round_seed(spec: Spec, point: ShapePoint, round_index: int) -> int:
    """A seed that differs per round and per shape, yet replays identically."""
    return zlib.crc32(f"{spec.verify.seed}:{round_index}:{point.name}".encode())


def draw(arg: Arg, dims: tuple[int, ...], rng: np.random.Generator) -> Array:
    """Host values for an input argument, encoded to its storage dtype."""
    dist = arg.dist
    # float32 draws: twice as fast as float64, and every device type is at most 32 bits wide
    # except fp64, which gets float64 draws.
    wide = arg.dtype.name == "fp64"
    if dist.kind == "normal":
        if wide:
            values: Array = rng.normal(dist.param("mean"), dist.param("std"), dims)
        else:
            values = rng.standard_normal(dims, dtype=np.float32)
            values = values * np.float32(dist.param("std")) + np.float32(dist.param("mean"))
    elif dist.kind == "uniform":
        if wide:
            values = rng.uniform(dist.param("low"), dist.param("high"), dims)
        else:
            low, high = np.float32(dist.param("low")), np.float32(dist.param("high"))
            values = rng.random(dims, dtype=np.float32) * (high - low) + low
    elif dist.kind == "randint":
        values = rng.integers(int(dist.param("low")), int(dist.param("high")), dims).astype(np.float64)
    else:  # arange
        count = int(np.prod(dims))
        values = (dist.param("start") + dist.param("step") * np.arange(count)).reshape(dims)
    for name, special in (("inf_fraction", np.inf), ("neginf_fraction", -np.inf)):
        frac = dist.param(name)
        if frac > 0:
            values = np.where(rng.random(dims, dtype=np.float32) < frac, special, values).astype(values.dtype)
    if arg.dtype.kind == "bool":
        return np.asarray(values != 0)
    return encode(values, arg.dtype)


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
    env = spec.env(point)
    rng = np.random.default_rng(seed)
    arrays: dict[str, Array] = {}
    for arg in spec.args:
        if not arg.is_array:
            continue
        dims = arg.dims(env)
        arrays[arg.name] = poison(dims, arg.dtype) if arg.role == "out" else draw(arg, dims, rng)
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
    decoded: dict[str, Any] = {}
    for arg in spec.args:
        if arg.is_array:
            decoded[arg.name] = decode(inputs[arg.name], arg.dtype)
    decoded.update(scalars(spec, env))
    result = fn(decoded, dict(env))
    out: dict[str, Array] = {}
    for arg in spec.args:
        if not arg.is_output:
            continue
        if arg.name not in result:
            raise KtxError(
                f"python reference {spec.reference.python} returned no {arg.name!r}",
                Location(str(spec.path)),
                f"return a dict with keys {', '.join(a.name for a in spec.args if a.is_output)}",
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


def compare(arg: Arg, got_stored: Array, want: Array, tol: Tolerance, want_is_stored: bool) -> Comparison:
    """Compare one output. ``want`` is a storage array (reference kernel) or float64 values
    (Python reference); both are brought to a common form first.

    Floats pass when every element is within ``atol + rtol * |want|`` and the largest error is
    at most ``max_abs``; a NaN or infinity where the reference has a finite value fails. fp8
    outputs compare codes, at most ``ulp`` apart. Integers compare exactly (within ``atol``).
    """
    shape = tuple(got_stored.shape)
    # Bit-identical (the usual case against the original kernel) needs no arithmetic, unless the
    # poison pattern is still there (float NaN poison already makes array_equal false).
    if (
        want_is_stored
        and got_stored.dtype == want.dtype
        and np.array_equal(got_stored, want)
        and not np.any(got_stored == poison((1,), arg.dtype)[0])
    ):
        return Comparison(True, "", 0.0, 0.0)
    if arg.dtype.kind == "fp8":
        want_codes = want if want_is_stored else encode(want, arg.dtype)
        got_v = decode(got_stored, arg.dtype)
        want_v = decode(want_codes, arg.dtype)
        got_nan, want_nan = np.isnan(got_v), np.isnan(want_v)
        dist = np.abs(fp8_order(got_stored) - fp8_order(want_codes))
        bad = (got_nan != want_nan) | (~want_nan & (dist > tol.ulp))
        err = np.where(got_nan | want_nan, 0.0, np.abs(got_v - want_v))
        return _result(arg, bad, got_v, want_v, err, shape, f"more than {tol.ulp} ulp apart")
    got = decode(got_stored, arg.dtype)
    ref = decode(want, arg.dtype) if want_is_stored else np.asarray(want, dtype=np.float64)
    finite = np.isfinite(ref)
    with np.errstate(invalid="ignore"):
        err = np.where(finite, np.abs(got - ref), 0.0)
    err = np.where(np.isnan(err), np.inf, err)
    limit = tol.atol + tol.rtol * np.abs(np.where(finite, ref, 0.0))
    nonfinite_match = np.where(np.isnan(ref), np.isnan(got), got == ref)
    bad = np.where(finite, ~(err <= limit), ~nonfinite_match)
    result = _result(arg, bad, got, ref, err, shape, f"beyond atol={tol.atol:g} + rtol={tol.rtol:g}*|want|")
    if result.ok and result.max_abs_err > tol.max_abs:
        flat = int(np.argmax(err))
        return Comparison(
            False,
            f"{arg.name}: max abs error {result.max_abs_err:.4g} exceeds the cap {tol.max_abs:g} "
            f"at {_index(flat, shape)} (got {got.ravel()[flat]:.6g}, want {ref.ravel()[flat]:.6g})",
            result.max_abs_err,
            result.rel_err,
        )
    return result


def _result(
    arg: Arg, bad: Array, got: Array, want: Array, err: Array, shape: tuple[int, ...], why: str
) -> Comparison:
    finite_err = err[np.isfinite(err)]
    max_abs = float(finite_err.max()) if finite_err.size else 0.0
    if np.isinf(err).any():
        max_abs = float("inf")
    both = np.isfinite(want) & np.isfinite(got)
    norm = float(np.linalg.norm(want[both])) if both.any() else 0.0
    diff = float(np.linalg.norm(got[both] - want[both])) if both.any() else 0.0
    rel = diff / norm if norm > 0 else diff
    count = int(np.count_nonzero(bad))
    if count == 0:
        return Comparison(True, "", max_abs, rel)
    flat = int(np.flatnonzero(bad.ravel())[0])
    g, w = got.ravel()[flat], want.ravel()[flat]
    kind = "NaN/Inf where the reference has none" if not np.isfinite(g) and np.isfinite(w) else why
    message = (
        f"{arg.name}: {count} of {bad.size} elements differ ({kind}); first at "
        f"{_index(flat, shape)}: got {g:.6g}, want {w:.6g}"
    )
    return Comparison(False, message, max_abs, rel)
