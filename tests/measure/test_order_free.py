"""Order-free comparison of an output (``order = "multiset ..."``): slots handed out by
``atomicAdd`` (DeepSpeed's MoE gating offsets) differ between two runs of the original, yet a
candidate that writes the same multiset per group passes and one that writes another fails."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from ktx.ir.errors import KtxError

from ktx.dtypes import encode
from ktx.measure.gpu import prime
from ktx.measure.verify import compare_output
from ktx.spec import Spec, parse_spec

SPEC = """\
kernel = "k"

[[args]]
name = "assignments"
dtype = "int32"
shape = "[n, K]"
role = "out"

[[args]]
name = "offsets"
dtype = "int32"
shape = "[n, K]"
role = "out"
{order}

[[args]]
name = "scores"
dtype = "{score_dtype}"
shape = "[n, K]"
role = "out"
{score_order}

[shapes]
default = [{{ n = 64, K = 2 }}]

[launch]
grid = ["n"]
block = ["32"]
"""


PER_ASSIGNMENTS = 'order = "multiset per assignments"'


def spec_of(
    tmp_path: Path, order: str = PER_ASSIGNMENTS, score_order: str = "", score_dtype: str = "fp32"
) -> Spec:
    (tmp_path / "kernel.cu").write_text("__global__ void k(int* a, int* o, float* s) {}\n")
    text = SPEC.format(order=order, score_order=score_order, score_dtype=score_dtype)
    return parse_spec(text, tmp_path / "ktx.toml")


def gating(seed: int, n: int = 64, k: int = 2, experts: int = 8) -> dict[str, np.ndarray]:
    """Top-k routing as the kernel computes it, with the blocks (tokens) run in an order drawn
    from ``seed``: each token's slot in its expert is the counter's value when it got there."""
    rng = np.random.default_rng(0)  # the routing itself is the same in every run
    assignments = np.stack([rng.choice(experts, k, replace=False) for _ in range(n)]).astype(np.int32)
    offsets = np.full((n, k), -1, np.int32)
    counts = np.zeros(experts, np.int64)
    for token in np.random.default_rng(seed).permutation(n):  # the order the blocks run in
        for i in range(k):
            e = assignments[token, i]
            offsets[token, i] = counts[e]
            counts[e] += 1
    scores = np.linspace(0.1, 0.9, n * k, dtype=np.float32).reshape(n, k)
    return {"assignments": assignments, "offsets": offsets, "scores": scores}


def test_two_runs_disagree_in_order_and_agree_as_multisets(tmp_path: Path) -> None:
    spec = spec_of(tmp_path)
    offsets = next(a for a in spec.args if a.name == "offsets")
    first, second = gating(1), gating(2)
    assert (first["offsets"] != second["offsets"]).any(), "the block order changes the slots"
    in_order = spec_of(tmp_path, order="")
    plain = next(a for a in in_order.args if a.name == "offsets")
    tol = spec.tolerance_for(offsets.dtype)
    assert not compare_output(plain, second, first, tol, True, in_order, np).ok
    result = compare_output(offsets, second, first, tol, True, spec, np)
    assert result.ok, result.message


def test_a_wrong_multiset_still_fails(tmp_path: Path) -> None:
    spec = spec_of(tmp_path)
    offsets = next(a for a in spec.args if a.name == "offsets")
    tol = spec.tolerance_for(offsets.dtype)
    want = gating(1)
    dup = {k: v.copy() for k, v in gating(2).items()}
    # a slot handed out twice (a lost atomic): the same expert's multiset changes
    e = dup["assignments"][0, 0]
    other = np.argwhere(dup["assignments"] == e)[1]
    dup["offsets"][tuple(other)] = dup["offsets"][0, 0]
    bad = compare_output(offsets, dup, want, tol, True, spec, np)
    assert not bad.ok and "multiset per assignments" in bad.message
    # every slot one higher: same order of values, another multiset
    shifted = {**want, "offsets": want["offsets"] + 1}
    assert not compare_output(offsets, shifted, want, tol, True, spec, np).ok
    # two tokens swap experts but keep their slots: the per-expert multisets change
    moved = {k: v.copy() for k, v in want.items()}
    flat_e, flat_o = moved["assignments"].reshape(-1), moved["offsets"].reshape(-1)
    j = next(j for j in range(1, flat_e.size) if flat_e[j] != flat_e[0] and flat_o[j] != flat_o[0])
    flat_e[0], flat_e[j] = flat_e[j], flat_e[0]
    assert not compare_output(offsets, moved, want, tol, True, spec, np).ok


def test_groups_that_differ_in_size_fail(tmp_path: Path) -> None:
    spec = spec_of(tmp_path)
    offsets = next(a for a in spec.args if a.name == "offsets")
    want = gating(1)
    got = {k: v.copy() for k, v in want.items()}
    got["assignments"][0, 0] = 99  # a token routed to an expert that does not exist
    result = compare_output(offsets, got, want, spec.tolerance_for(offsets.dtype), True, spec, np)
    assert not result.ok and "groups by assignments differ" in result.message


@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16"])
def test_rows_and_whole_outputs_as_multisets_under_tolerance(tmp_path: Path, dtype: str) -> None:
    spec = spec_of(tmp_path, score_order='order = "multiset per row"', score_dtype=dtype)
    scores = next(a for a in spec.args if a.name == "scores")
    tol = spec.tolerance_for(scores.dtype)
    values = np.random.default_rng(3).standard_normal((64, 2))
    want = {"scores": encode(values, dtype)}
    swapped = {"scores": encode(values[:, ::-1].copy(), dtype)}  # each row's two values swapped
    assert compare_output(scores, swapped, want, tol, True, spec, np).ok
    # float64 values from a Python reference, the got side in storage
    assert compare_output(scores, swapped, {"scores": values}, tol, False, spec, np).ok
    across = {"scores": encode(np.roll(values, 1, axis=0), dtype)}  # values moved between rows
    bad = compare_output(scores, across, want, tol, True, spec, np)
    assert not bad.ok and "multiset per row" in bad.message
    whole = spec_of(tmp_path, score_order='order = "multiset"', score_dtype=dtype)
    arg = next(a for a in whole.args if a.name == "scores")
    assert compare_output(arg, across, want, tol, True, whole, np).ok
    off = {"scores": encode(np.roll(values, 1, axis=0) + 0.5, dtype)}
    assert not compare_output(arg, off, want, tol, True, whole, np).ok


@pytest.mark.parametrize(
    ("order", "message"),
    [
        ('order = "sorted"', "unknown order 'sorted'"),
        ('order = "multiset per nothing"', "'nothing' is not an output"),
        ('order = "multiset per offsets"', "'offsets' is itself compared as a multiset"),
    ],
)
def test_bad_orders_name_the_key(tmp_path: Path, order: str, message: str) -> None:
    with pytest.raises(KtxError) as info:
        spec_of(tmp_path, score_order=order)
    assert message in str(info.value) and info.value.location is not None and info.value.location.line > 0


def test_an_input_takes_no_order(tmp_path: Path) -> None:
    (tmp_path / "kernel.cu").write_text("__global__ void k(float* x) {}\n")
    text = ('kernel = "k"\n[[args]]\nname = "x"\ndtype = "fp32"\nshape = "[n]"\norder = "multiset"\n'
            '[shapes]\ndefault = [{ n = 4 }]\n[launch]\ngrid = ["1"]\nblock = ["n"]\n')  # fmt: skip
    with pytest.raises(KtxError, match="an input takes no order"):
        parse_spec(text, tmp_path / "ktx.toml")


def test_prime_runs_the_multiset_path(tmp_path: Path) -> None:
    """The GPU worker primes CuPy's kernels on tiny arrays; numpy runs the same code here."""
    prime(spec_of(tmp_path, score_order='order = "multiset per row"'), np)


def test_the_order_is_part_of_the_measurement_key(tmp_path: Path) -> None:
    """A measurement verified order-free is not reused for a spec that compares in order."""
    from ktx.search.tunable import spec_digest

    free = spec_digest(spec_of(tmp_path))
    assert spec_digest(spec_of(tmp_path, order="")) != free
    assert spec_digest(spec_of(tmp_path)) == free
