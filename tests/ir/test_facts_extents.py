"""The bounds check's source side (ktx.ir.facts.extents, .witness, .lanes): an access is out of
bounds only with a witness, a block, thread and loop values the kernel really takes at which it
lands outside its buffer; what is only bounded past the end is not proven (issue 21)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from ktx.ir import parse, parse_file
from ktx.ir.facts.extents import AccessCheck, KernelExtents, PointValues
from ktx.ir.facts.lanes import Lanes

from ktx.measure.compile import find_nvcc
from ktx.measure.sanitize import find_sanitizer

HERE = Path(__file__).resolve().parent / "bounds"
GROUP = 128


def quantiser_point(name: str, tokens: int, hidden: int) -> PointValues:
    """The launch group_quant_int8 makes: 16 groups of 16 lanes a block of 256 threads."""
    groups = tokens * hidden // GROUP
    return PointValues(
        f"tokens={tokens},hidden={hidden}",
        ((groups + 15) // 16,),
        (256,),
        0,
        (("group_size", GROUP), ("num_groups", groups)),
        (),
        (("in", tokens * hidden), ("out", tokens * hidden), ("scales", groups)),
    )


def checks(file: str, point: PointValues) -> list[AccessCheck]:
    module = parse_file(HERE / file)
    return KernelExtents(module, module.kernels[0]).check(point)


def loads_of_in(found: list[AccessCheck]) -> list[AccessCheck]:
    return [c for c in found if c.buffer == "in" and "uint4" in c.text]


def touched_by_the_strided_loops(tokens: int, hidden: int, bound_inclusive: bool) -> int:
    """The last element of ``in`` the kernel's loads touch, by running its loop in Python: every
    block, every thread, every iteration (what the analysis must agree with)."""
    groups = tokens * hidden // GROUP
    last = -1
    for block in range((groups + 15) // 16):
        for thread in range(256):
            lane, group = thread % 16, block * 16 + thread // 16
            if group >= groups:
                continue
            i = lane * 8
            while i < GROUP or (bound_inclusive and i == GROUP):
                last = max(last, group * GROUP + i + 7)
                i += 16 * 8
    return last


@pytest.mark.parametrize(("tokens", "hidden"), [(1, 1536), (3, 4096)])
def test_the_strided_pack_is_bounded_past_the_end_but_not_an_error(tokens: int, hidden: int) -> None:
    # Issue 21: i <= 127 plus the 8-wide pack bounds the load at element 1,542 of 1,536, but the
    # last load of a group starts at 120: no thread reaches past the end.
    assert touched_by_the_strided_loops(tokens, hidden, bound_inclusive=False) == tokens * hidden - 1
    every = checks("group_quant_strided.cu", quantiser_point("p", tokens, hidden))
    # h = reinterpret_cast<const __nv_bfloat16*>(&v) and q (&packed) point at registers.
    assert not [c for c in every if c.text in ("h[j]", "q[j]")]
    found = loads_of_in(every)
    assert len(found) == 2
    for c in found:
        assert c.status == "unproven" and c.witness is None
        assert c.reach is not None and c.reach.hi == tokens * hidden + 6
    assert "not proven: bounded by elements 0..1,542 of in's 1,536" in found[0].message() or tokens != 1


def test_the_off_by_one_loop_is_caught_with_a_witness_the_kernel_really_takes() -> None:
    tokens, hidden = 1, 1536
    assert touched_by_the_strided_loops(tokens, hidden, bound_inclusive=True) == 1543
    found = loads_of_in(checks("group_quant_overrun.cu", quantiser_point("p", tokens, hidden)))
    bad = [c for c in found if c.status == "out_of_bounds"]
    assert [c.line for c in bad] == [15]  # the amax loop; the second loop is only bounded
    w = bad[0].witness
    assert w is not None
    # The witness is a real case: thread 176 is lane 0 of group 11, whose second load is at 128.
    assert (w.block, w.thread, w.loops) == ((0, 0, 0), (176, 0, 0), (("i", 128),))
    group, lane = w.block[0] * 16 + w.thread[0] // 16, w.thread[0] % 16
    assert w.loops[0][1] == lane * 8 + 128
    assert (w.first, w.last) == (group * GROUP + 128, group * GROUP + 135) == (1536, 1543)
    assert bad[0].message(" (shape [tokens, hidden])") == (
        "load *reinterpret_cast<const uint4*>(src + i) reaches element 1,543 but in has 1,536 "
        "elements (shape [tokens, hidden]) at tokens=1,hidden=1536: blockIdx=(0, 0, 0) "
        "threadIdx=(176, 0, 0) i=128 (index 1,536, 8 elements)"
    )


def test_the_witness_is_on_the_last_block_of_a_large_grid() -> None:
    point = quantiser_point("p", 64, 7168)  # 3,584 groups, 224 blocks
    (bad,) = [c for c in loads_of_in(checks("group_quant_overrun.cu", point)) if c.status == "out_of_bounds"]
    assert bad.witness is not None and bad.witness.block == (223, 0, 0)
    assert bad.witness.last == 64 * 7168 + 7


def kernel_checks(source: str, block: int, extents: dict[str, int], grid: int = 1) -> list[AccessCheck]:
    module = parse(source)
    point = PointValues("n", (grid,), (block,), 0, (("n", extents.get("x", 0)),), (), tuple(extents.items()))
    return KernelExtents(module, module.kernels[0]).check(point)


def test_a_data_dependent_guard_gives_no_witness() -> None:
    # out[i + 1] reaches past the end only where flags[i] says so: nothing proves it happens.
    source = (
        "__global__ void k(float* x, const int* flags, int n) {\n"
        "  int i = threadIdx.x;\n"
        "  if (flags[i] > 0) x[i + 1] = 0.f;\n}\n"
    )
    (store,) = [c for c in kernel_checks(source, 128, {"x": 128, "flags": 128}) if c.buffer == "x"]
    assert store.status == "unproven" and store.witness is None


def test_a_decided_guard_gives_a_witness() -> None:
    source = (
        "__global__ void k(float* x, int n) {\n  int i = threadIdx.x;\n  if (i == n - 1) x[i + 1] = 0.f;\n}\n"
    )
    (store,) = kernel_checks(source, 128, {"x": 128})
    assert store.status == "out_of_bounds" and store.witness is not None
    assert store.witness.thread == (127, 0, 0) and store.witness.first == 128


def test_threads_that_return_first_are_not_witnesses() -> None:
    # Odd threads leave; even ones write x[t + 1] <= x[127]: bounded at 128, reached by none.
    source = (
        "__global__ void k(float* x, int n) {\n"
        "  if (threadIdx.x % 2) return;\n  x[threadIdx.x + 1] = 0.f;\n}\n"
    )
    (store,) = kernel_checks(source, 128, {"x": 128})
    assert store.status == "unproven" and store.reach is not None and store.reach.hi == 128
    (over,) = kernel_checks(source.replace("% 2) return", "% 2 == 0) return"), 128, {"x": 128})
    assert over.status == "out_of_bounds" and over.witness is not None and over.witness.thread == (127, 0, 0)


def test_a_loop_that_can_break_is_tried_at_its_first_iteration_only() -> None:
    # A data-dependent break after the store may end the loop after its first iteration (i = t,
    # in bounds): the second (i = t + 64, past the end) is not certain to run.
    source = (
        "__global__ void k(float* x, const float* y, int n) {\n"
        "  for (int i = threadIdx.x; i < 2 * n; i += blockDim.x) {\n"
        "    x[i] = 0.f;\n    if (y[0] > 0.f) break;\n  }\n}\n"
    )
    (store,) = [c for c in kernel_checks(source, 64, {"x": 64, "y": 1}) if c.buffer == "x"]
    assert store.status == "unproven"
    plain = source.replace("    if (y[0] > 0.f) break;\n", "")
    (store,) = [c for c in kernel_checks(plain, 64, {"x": 64, "y": 1}) if c.buffer == "x"]
    assert store.status == "out_of_bounds" and store.witness is not None
    assert store.witness.loops == (("i", store.witness.thread[0] + 64),)


def test_lanes_divide_and_take_remainders_as_c_does() -> None:
    module = parse("__global__ void k(int a, int b) { int q = a / b; int r = a % b; }\n")
    ix = KernelExtents(module, module.kernels[0]).ix
    a = np.array([-7, 7, -7, 7, 5], dtype=np.int64)
    b = np.array([2, 2, -2, -2, 0], dtype=np.int64)
    lanes = Lanes(ix, 5, {"a": a, "b": b}, {}, {})
    q = lanes.symbol("q", ix.body)
    r = lanes.symbol("r", ix.body)
    assert list(np.asarray(q)[:4]) == [-3, 3, 3, -3]
    assert list(np.asarray(r)[:4]) == [-1, 1, -1, 1]
    # 5 / 0 is dropped, and so is every lane with a negative operand: unsigned C differs there.
    assert list(lanes.valid) == [False, True, False, False, False]


def test_a_comparison_that_unsigned_c_decides_otherwise_gives_no_witness() -> None:
    # At thread 0, threadIdx.x - 1 is 4294967295 in C: the guard is false and nothing is stored.
    guarded = (
        "__global__ void k(float* x, int n) {\n  if (threadIdx.x - 1 < n) x[threadIdx.x - 1] = 0.f;\n}\n"
    )
    (store,) = kernel_checks(guarded, 64, {"x": 64})
    assert store.witness is None
    (bare,) = kernel_checks(guarded.replace("if (threadIdx.x - 1 < n) ", ""), 64, {"x": 64})
    assert bare.status == "out_of_bounds" and bare.witness is not None and bare.witness.thread == (0, 0, 0)


def test_a_reassigned_parameter_or_an_inactive_preprocessor_arm_gives_no_witness() -> None:
    # n is halved before the loop: the spec's n is not the n the loop sees.
    halved = (
        "__global__ void k(float* x, int n) {\n  n = n / 2;\n"
        "  for (int i = threadIdx.x; i < 2 * n; i += blockDim.x) x[i] = 0.f;\n}\n"
    )
    (store,) = kernel_checks(halved, 64, {"x": 64})
    assert store.status == "unproven" and store.witness is None
    # Only one arm of #if is compiled; the tree holds both.
    arms = (
        "__global__ void k(float* x, int n) {\n#if WIDE\n  x[threadIdx.x + 64] = 0.f;\n#else\n"
        "  x[threadIdx.x] = 0.f;\n#endif\n}\n"
    )
    wide = [c for c in kernel_checks(arms, 64, {"x": 64}) if "+ 64" in c.text]
    assert [c.status for c in wide] == ["unproven"]


def _build(tmp_path: Path, kernel: str) -> Path:
    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc is not here")
    binary = tmp_path / kernel
    command = [nvcc, "-arch=sm_90", "-O2", f'-DKERNEL_FILE="{kernel}.cu"', "-I", str(HERE)]
    built = subprocess.run(
        [*command, "-o", str(binary), str(HERE / "run_quant.cu")], capture_output=True, text=True
    )
    assert built.returncode == 0, built.stderr
    return binary


@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["group_quant_strided", "group_quant_overrun"])
def test_the_quantisers_are_real_cuda(kernel: str, tmp_path: Path) -> None:
    assert _build(tmp_path, kernel).is_file()


@pytest.mark.gpu
@pytest.mark.parametrize(("kernel", "clean"), [("group_quant_strided", True), ("group_quant_overrun", False)])
def test_compute_sanitizer_agrees_with_the_witness(kernel: str, clean: bool, tmp_path: Path) -> None:
    # On the device, at the witness's point (1 token of 1,536): the strided loads stay inside
    # in; the off-by-one loop's 16-byte load by thread 176 of block 0 leaves it. Padding after
    # each allocation: without it the read past in lands in out, a valid address, and memcheck
    # is silent (seen on an H100, 2026-11-27).
    sanitizer, places = find_sanitizer()
    if sanitizer is None:
        pytest.skip(f"compute-sanitizer is not in {places}")
    binary = _build(tmp_path, kernel)
    ran = subprocess.run(
        [sanitizer, "--tool", "memcheck", "--padding", "4096", str(binary), "1", "1536"],
        capture_output=True,
        text=True,
    )
    text = ran.stdout + ran.stderr
    if clean:
        assert ran.returncode == 0 and "ERROR SUMMARY: 0 errors" in text, text
    else:
        assert "Invalid __global__ read of size 16 bytes" in text, text
        assert "by thread (176,0,0) in block (0,0,0)" in text, text


def test_a_constant_past_64_bits_gives_no_witness_and_no_crash() -> None:
    source = (
        "__global__ void k(float* x, int n) {\n"
        "  x[(threadIdx.x * 0xFFFFFFFFFFFFFFFFull) % 1000 + 64] = 0.f;\n}\n"
    )
    (store,) = kernel_checks(source, 64, {"x": 64})
    assert store.status == "unproven" and store.witness is None


def test_a_static_shared_array_is_sized_by_the_specs_template_value() -> None:
    # The launcher instantiates BLOCK = 128; the spec runs BLOCK = 256 with 256 threads.
    source = (
        "template <int BLOCK> __global__ void k(float* x) {\n"
        "  __shared__ float s[BLOCK];\n  s[threadIdx.x] = x[threadIdx.x];\n}\n"
        "void go(float* x) { k<128><<<1, 128>>>(x); }\n"
    )
    module = parse(source)
    kernel = KernelExtents(module, module.kernels[0])
    found = kernel.check(PointValues("p", (1,), (256,), 0, (), ("256",), (("x", 256),)))
    assert [c.status for c in found if c.buffer == "s"] == ["in_bounds"]
    found = kernel.check(PointValues("p", (1,), (256,), 0, (), ("128",), (("x", 256),)))
    assert [c.status for c in found if c.buffer == "s"] == ["out_of_bounds"]
