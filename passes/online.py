"""``online``: a row max and the sum of ``exp(x - max)`` after it fuse into one pass (knob ONLINE).

A softmax written plainly reads its row three times: the max, the sum of exponentials, the
normalised write. The sum depends on the max only through ``exp(x - m)``, which can be rescaled
when ``m`` grows: ``exp(x - m') = exp(x - m) * exp(m - m')``. So one loop can keep the running
pair ``(m, s)`` (Milakov & Gimelshein 2018, online softmax), saving a read of the row. With
``ONLINE = 1`` (0, the original, by default) the pair that
:mod:`ktx.ir.facts.online` recognises becomes::

    for (j ...) {                           // was: the max loop, then the sum loop
      const float ktx_x = x[j];
      const float ktx_d = ktx_x == m ? 0.f : ktx_x - m;   // -inf - -inf: 0, not NaN
      const bool ktx_up = ktx_d > 0;        // the max moves: rescale the sum to it
      const float ktx_e = expf(ktx_up ? -ktx_d : ktx_d);
      s = ktx_up ? s * ktx_e + 1 : s + ktx_e;
      m = ktx_up ? ktx_x : m;
    }
    for (j ...) { o[j] = expf(x[j] - m); o[j] /= s; }   // the sum loop's stores, and the
                                                        // in-place loop after it, joined

One exponential per element, and selects rather than a branch, so the lanes of a warp never
diverge. Composes with ``row-owner`` (run it first): its two cross-lane reductions (the max,
then the sum) become one reduction of pairs, ``ktx_online_reduce<T>(m, s)``, which combines
``(m1, s1), (m2, s2)`` as ``(max, s1 * exp(m1 - max) + s2 * exp(m2 - max))`` over shuffles and,
past a warp, shared memory. Every change sits under ``#if KTX_ONLINE``.

Precision: the sum is accumulated in a different order and rescaled, so it differs from the
three-pass sum by rounding (relative 1e-6 in float over 50k elements; a ``double`` sum stays
double). A row whose leading elements are ``-inf`` (a masked prefix) counts them at the scale
``-inf`` (``x == m`` gives a difference of 0, not ``-inf - -inf`` = NaN), and the first finite
element rescales that count by ``exp(-inf) = 0``: the original's 0 for them, not NaN.

The second pair is the layernorm's: a sum ``m`` (divided into the mean between the loops), then
``v += (x - c) * (x - c)`` with ``c`` computed from ``m`` (llm.c's layernorm_forward v1 and
fused_residual_forward v2). The first loop stays as written, so ``m`` keeps its exact value, and
also folds what the second loop reads into Welford's quadruple: the count, a shift (the lane's
first element), and the mean and the squared deviations of ``x - shift``; the second loop goes,
and ``v += M2 + n * ((shift - c) + mean)^2`` (the sum of squares about any centre ``c``).
After row-owner the quadruple is reduced across the row's lanes by ``ktx_welford_reduce<T>``
(Chan et al.'s combine over shuffles, then shared memory past a warp), beside row-owner's own
reduce of ``m``. Precision guard: the shift keeps the running mean small, so a row whose mean is
1e4 times its spread keeps its digits (a numpy replay of the emitted combine: relative 2e-5 of
the two-pass sum against 1e-2 and worse for the sum, sum-of-squares pair); the spec's
tolerance should still allow a few ulps of ``v`` (rstd moves by half of ``v``'s relative error).

``ONLINE = 2`` (offered only where a mean/variance pair is fused) keeps the first loop as written
too, but folds what the second loop reads into three plain sums, the count ``n`` (an int), ``Σx``
and ``Σx²``, and ``v += Σx² - c (2 Σx - n c)``. Every state is a ``+=`` reduction, so ``vectorize``
packs the fused loop (16-byte loads, as llm.c's hand v4/v5 read the row), which Welford's running
shift (``k = n > 0 ? k : x``, carried from one iteration to the next) forbids. After row-owner
the three sums are reduced across the row's lanes by ``ktx_sum_pair_reduce<T>`` (one butterfly,
one shared-memory pass). Precision guard: the sums are kept in ``double`` whatever ``v``'s type
(each ``x * x`` of a float is exact in double; the conversions and double adds cost little in a
kernel bound by memory), not in float as v4 keeps them: the cancellation of ``Σx²`` against
``c (2 Σx - n c)`` costs a relative ``C 2^-53 (mean^2 / variance)`` of ``v`` at worst. A numpy
replay of the emitted sums and reduce, over 768 to 4097 elements of mean 1e4 and spread 0.1
(mean^2 / variance = 1e10): relative 6e-5 of the two-pass sum at one thread a row, 2e-5 to 6e-7
over 32 to 1024 lanes (Welford: 2e-5); the float pair is off by 1 to 1e5 times ``v`` there. So the
spec's tolerance must allow a relative ``C 2^-53 mean^2 / variance`` of ``v`` (half of it on
rstd): under 1e-4 while ``|mean| / spread`` stays below 1e5 at C = 768, which any fp32 or bf16
spec allows; the pass cannot see the spec's tolerance, so a row beyond that fails ``ktx``'s
verification of the candidate rather than being refused here. The pair's ``double`` adds are the
price; Welford (1) stays for a kernel that cannot pay it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from ktx.ir import syntax
from ktx.ir.facts.online import OnlinePair, VariancePair, online_pairs
from ktx.passes._common import kernel_node
from ktx.passes._variants import line_bounds, wrap_lines

from ktx.passbase import KnobSpec, Pass, Phase, Refuse, Rewriter, Site, Skip, Target

KNOB = "ONLINE"
COND = "KTX_ONLINE"

HELPERS = """\
#ifndef KTX_ONLINE_REDUCE
#define KTX_ONLINE_REDUCE
// online: combine two (max, sum of exp(x - max)) pairs; a side at -inf adds nothing
template <typename M, typename S>
__device__ __forceinline__ void ktx_online_combine(M& m, S& s, M om, S os) {
  const M nm = m > om ? m : om;
  s = (m == nm ? s : s * exp(m - nm)) + (om == nm ? os : os * exp(om - nm));
  m = nm;
}
// online: reduce the pair over the T threads that own a row (all lanes get it)
template <int T, typename M, typename S>
__device__ __forceinline__ void ktx_online_reduce(M& m, S& s) {
  constexpr int W = T < 32 ? T : 32;
  const unsigned group = threadIdx.x & 31u & ~(unsigned)(W - 1);
  const unsigned mask = W == 32 ? 0xffffffffu : ((1u << W) - 1u) << group;
#pragma unroll
  for (int o = W / 2; o > 0; o /= 2) {
    const M om = __shfl_xor_sync(mask, m, o);
    const S os = __shfl_xor_sync(mask, s, o);
    ktx_online_combine(m, s, om, os);
  }
  __syncwarp(mask);
  if (T > 32) {
    __shared__ M pm[32];
    __shared__ S ps[32];
    __syncthreads();
    if ((threadIdx.x & 31u) == 0) {
      pm[threadIdx.x / 32] = m;
      ps[threadIdx.x / 32] = s;
    }
    __syncthreads();
    m = pm[0];
    s = ps[0];
    for (int w = 1; w < T / 32; ++w) ktx_online_combine(m, s, pm[w], ps[w]);
  }
}
#endif
"""


WELFORD_HELPERS = """\
#ifndef KTX_WELFORD_REDUCE
#define KTX_WELFORD_REDUCE
// online: merge two Welford quadruples (count, shift, mean and squared deviations of x - shift),
// Chan et al. 1979; each side's mean is kept relative to its shift (its first element), so a row
// whose mean is far larger than its spread loses no digits to the running mean's rounding
template <typename V>
__device__ __forceinline__ void ktx_welford_combine(V& n, V& k, V& mean, V& m2, V on, V ok, V omean, V om2) {
  k = n > V(0) ? k : ok;
  const V tn = n + on;
  const V w = tn > V(0) ? on / tn : V(0);
  const V d = (ok - k) + (omean - mean);
  mean += d * w;
  m2 += om2 + d * d * n * w;
  n = tn;
}
// online: reduce the quadruple over the T threads that own a row (all lanes get it)
template <int T, typename V>
__device__ __forceinline__ void ktx_welford_reduce(V& n, V& k, V& mean, V& m2) {
  constexpr int W = T < 32 ? T : 32;
  const unsigned group = threadIdx.x & 31u & ~(unsigned)(W - 1);
  const unsigned mask = W == 32 ? 0xffffffffu : ((1u << W) - 1u) << group;
#pragma unroll
  for (int o = W / 2; o > 0; o /= 2) {
    const V on = __shfl_xor_sync(mask, n, o);
    const V ok = __shfl_xor_sync(mask, k, o);
    const V omean = __shfl_xor_sync(mask, mean, o);
    const V om2 = __shfl_xor_sync(mask, m2, o);
    ktx_welford_combine(n, k, mean, m2, on, ok, omean, om2);
  }
  __syncwarp(mask);
  if (T > 32) {
    __shared__ V pn[32], pk[32], pmean[32], pm2[32];
    __syncthreads();
    if ((threadIdx.x & 31u) == 0) {
      pn[threadIdx.x / 32] = n;
      pk[threadIdx.x / 32] = k;
      pmean[threadIdx.x / 32] = mean;
      pm2[threadIdx.x / 32] = m2;
    }
    __syncthreads();
    n = pn[0];
    k = pk[0];
    mean = pmean[0];
    m2 = pm2[0];
    for (int w = 1; w < T / 32; ++w) ktx_welford_combine(n, k, mean, m2, pn[w], pk[w], pmean[w], pm2[w]);
  }
}
#endif
"""


PAIR_HELPERS = """\
#ifndef KTX_SUM_PAIR_REDUCE
#define KTX_SUM_PAIR_REDUCE
// online (ONLINE=2): sum the count, the sum and the sum of squares over the T threads that own a
// row (all lanes get them); plain sums, so one butterfly and one shared-memory pass for all three
template <int T, typename N, typename V>
__device__ __forceinline__ void ktx_sum_pair_reduce(N& n, V& s1, V& s2) {
  constexpr int W = T < 32 ? T : 32;
  const unsigned group = threadIdx.x & 31u & ~(unsigned)(W - 1);
  const unsigned mask = W == 32 ? 0xffffffffu : ((1u << W) - 1u) << group;
#pragma unroll
  for (int o = W / 2; o > 0; o /= 2) {
    n += __shfl_xor_sync(mask, n, o);
    s1 += __shfl_xor_sync(mask, s1, o);
    s2 += __shfl_xor_sync(mask, s2, o);
  }
  __syncwarp(mask);
  if (T > 32) {
    __shared__ N pn[32];
    __shared__ V p1[32], p2[32];
    __syncthreads();
    if ((threadIdx.x & 31u) == 0) {
      pn[threadIdx.x / 32] = n;
      p1[threadIdx.x / 32] = s1;
      p2[threadIdx.x / 32] = s2;
    }
    __syncthreads();
    n = pn[0];
    s1 = p1[0];
    s2 = p2[0];
    for (int w = 1; w < T / 32; ++w) {
      n += pn[w];
      s1 += p1[w];
      s2 += p2[w];
    }
  }
}
#endif
"""

#: ONLINE=2's accumulator: the Σx, Σx² pair is kept in double whatever ``v``'s type (the guard)
PAIR_TYPE = "double"


@dataclass(frozen=True)
class OnlineSite(Site):
    pairs: tuple[OnlinePair | VariancePair, ...]


class Online(Pass[OnlineSite]):
    name = "online"
    phase = Phase.OWNERSHIP
    summary = (
        "a row max and the sum of exp(x - max), or a mean and the squared deviations: one pass (knob ONLINE)"
    )
    description = __doc__ or ""
    knobs = (
        KnobSpec(
            KNOB,
            "0, 1 (2 for a mean/variance pair)",
            "0 (max, then sum: the original)",
            "1: one loop keeps the running (max, rescaled sum) pair; the stores join the loop after;"
            " for a mean/variance pair 1 is Welford, 2 the count, Σx, Σx² sums in double"
            " (vectorize packs it)",
        ),
    )
    after = ("expose", "row-owner", "block-size")

    def sites(self, target: Target) -> Iterator[OnlineSite | Skip]:
        fn = target.kernel
        pairs, why = online_pairs(target.module, fn)
        if not pairs:
            reason = "; ".join(why) if why else "no row max followed by a sum of exp(x - max)"
            yield Skip(reason, fn.name, fn.span)
            return
        yield OnlineSite(fn.name, fn.span, pairs)

    def rewrite(self, site: OnlineSite, rw: Rewriter) -> None:
        module = rw.target.module
        source = module.source
        rw.knob(KNOB, _values(site), 0, "1: max and sum of exp(x - max) in one pass (running pair)")
        notes: list[str] = []
        for p in site.pairs:
            first, _ = line_bounds(source, p.first.start_byte, p.first.start_byte)
            _, last = line_bounds(source, p.last.end_byte, p.last.end_byte)
            if source[first : p.first.start_byte].strip():
                raise Refuse(f"line {p.line}: the max loop does not start its line")
            if isinstance(p, VariancePair):
                wrap_lines(rw, first, last, _variance_forms(source, p), f"{COND} == 2")
                lanes = f"; one triple reduction over {p.group} lanes" if p.group else ""
                notes.append(
                    f"{p.m} (line {p.lead.line}) and the squared deviations {p.v} (line {p.squares.line})"
                    f" in one pass (Welford){lanes}"
                )
                continue
            wrap_lines(rw, first, last, _fused(source, p), COND)
            joined = f"; the loop at line {p.fused.start_point[0] + 1} joins the stores" if p.fused else ""
            lanes = f"; one pair reduction over {p.group} lanes" if p.group else ""
            notes.append(
                f"{p.m} (line {p.maximum.line}) and {p.s} (line {p.total.line}) in one pass{joined}{lanes}"
            )
        start = syntax.line_start(source, kernel_node(rw.target).start_byte)
        if any(p.group for p in site.pairs if isinstance(p, OnlinePair)):
            rw.insert(start, HELPERS)
        if any(p.group for p in site.pairs if isinstance(p, VariancePair)):
            rw.insert(start, WELFORD_HELPERS)
            rw.insert(start, PAIR_HELPERS)
        rw.note("; ".join(notes))


def _values(site: OnlineSite) -> tuple[int, ...]:
    """ONLINE's values: 2 (the Σx, Σx² pair) only where a mean/variance pair is fused."""
    return (0, 1, 2) if any(isinstance(p, VariancePair) for p in site.pairs) else (0, 1)


def _lines(source: bytes, node_start: int, node_end: int, indent: str) -> str:
    """The whole lines of a statement, its indentation kept (``indent`` when code precedes it on
    its line, as in ``for (...) o[j] *= inv;``)."""
    first = syntax.line_start(source, node_start)
    if source[first:node_start].strip():
        return indent + source[node_start:node_end].decode()
    return source[first:node_end].decode()


def _inner(source: bytes, p: OnlinePair, indent: str) -> str:
    """The indentation of the sum loop's body (its first statement on a line of its own)."""
    for n in (*p.rest, *(u.statement for u in p.total.updates)):
        if not source[syntax.line_start(source, n.start_byte) : n.start_byte].strip():
            return syntax.indentation(source, n.start_byte)
    return indent + ("  " if len(indent) % 4 else "    ")


def _fused(source: bytes, p: OnlinePair) -> str:
    indent = syntax.indentation(source, p.first.start_byte)
    inner = _inner(source, p, indent)
    t = p.m_type
    out: list[str] = []
    for n in p.between:
        if n.type == "declaration":  # the sum's own declaration moves above the fused loop
            out.append(_lines(source, n.start_byte, n.end_byte, indent))
    out += [
        f"{indent}{_constant_stride(p)} {{",
        f"{inner}// online: the running max and the sum of {p.exp}(x - max) rescaled to it, in one pass",
        f"{inner}const {t} ktx_x = {p.element};",
        f"{inner}const {t} ktx_d = ktx_x == {p.m} ? {t}(0) : ktx_x - {p.m};  // -inf - -inf: 0, not NaN",
        f"{inner}const bool ktx_up = ktx_d > 0;",
        f"{inner}const {t} ktx_e = {p.exp}(ktx_up ? -ktx_d : ktx_d);",
        f"{inner}{p.s} = ktx_up ? {p.s} * ktx_e + 1 : {p.s} + ktx_e;",
        f"{inner}{p.m} = ktx_up ? ktx_x : {p.m};",
        f"{indent}}}",
    ]
    if p.group:
        out.append(f"{indent}ktx_online_reduce<{p.group}>({p.m}, {p.s});")
    body = [_lines(source, n.start_byte, n.end_byte, inner) for n in p.rest]
    if p.fused is not None:
        fb = p.fused.child_by_field_name("body")
        assert fb is not None
        stmts = [c for c in fb.named_children] if fb.type == "compound_statement" else [fb]
        body += [_lines(source, n.start_byte, n.end_byte, inner) for n in stmts if n.type != "comment"]
    if body:
        out += [_lines(source, n.start_byte, n.end_byte, indent) for n in p.pre]
        out.append(f"{indent}{p.header} {{")
        out += body
        out.append(f"{indent}}}")
    return "\n".join(out)


_BLOCK_STRIDE = re.compile(r"(\b\w+\s*\+=\s*)blockDim\.x(\s*\)\s*)$")


def _constant_stride(p: OnlinePair) -> str:
    """The fused loop's header, its ``+= blockDim.x`` step written as the group's size where
    that is the block (row-owner's ``T > 32``: the pair's reduce already takes ``blockDim.x ==
    T``), so the step is a compile-time constant.

    Why: nvcc unrolls a loop with a constant step by four and issues the four loads together,
    but leaves a ``+= blockDim.x`` loop rolled with one load in flight per thread (PTX of llm.c's
    softmax v1 after ``row-owner,online`` at T = 1024: 1 ``ld.global`` in the fused loop, 4 with
    the constant). At a 50257-element row that one load is what the loop waits on. Only this
    loop: vectorize refuses it anyway (its running pair is not a reorderable reduction), while
    the loop after it keeps ``blockDim.x`` for vectorize to read. ``G > 32 ? G : (int)blockDim.x``
    keeps any group of a warp or less on the block's own stride; an int, since an unsigned step
    lets the index wrap, and nvcc then leaves the loop rolled.
    """
    if not p.group or p.group == "32":
        return p.header
    g = p.group
    step = f"({g} > 32 ? {g} : (int)blockDim.x)"
    return _BLOCK_STRIDE.sub(lambda m: f"{m.group(1)}{step}{m.group(2)}", p.header)


def _welford(source: bytes, p: VariancePair) -> str:
    """The first loop as written plus Welford's update of what the second loop reads; the
    statements between the loops in order; then ``v`` from the triple."""
    indent = syntax.indentation(source, p.first.start_byte)
    stmts = p.body
    inner = indent + ("  " if len(indent) % 4 else "    ")
    for n in stmts:
        if not source[syntax.line_start(source, n.start_byte) : n.start_byte].strip():
            inner = syntax.indentation(source, n.start_byte)
            break
    t, k = p.v_type, f"ktx_{p.v}"
    out: list[str] = []
    if p.declaration is not None:
        out.append(_lines(source, p.declaration.start_byte, p.declaration.end_byte, indent))
    out += [
        f"{indent}// online: Welford's count, shift (the first element), mean and squared deviations of",
        f"{indent}// x - shift, for what {p.v} sums",
        f"{indent}{t} {k}_n = 0, {k}_k = 0, {k}_mean = 0, {k}_m2 = 0;",
        f"{indent}{p.header} {{",
        *(_lines(source, n.start_byte, n.end_byte, inner) for n in stmts),
        f"{inner}// online: the element the sum of squares reads, folded into the quadruple",
        f"{inner}const {t} ktx_x = {p.element};",
        f"{inner}{k}_k = {k}_n > 0 ? {k}_k : ktx_x;",
        f"{inner}const {t} ktx_y = ktx_x - {k}_k;",
        f"{inner}{k}_n += 1;",
        f"{inner}const {t} ktx_d = ktx_y - {k}_mean;",
        f"{inner}{k}_mean += ktx_d / {k}_n;",
        f"{inner}{k}_m2 += ktx_d * (ktx_y - {k}_mean);",
        f"{indent}}}",
    ]
    if p.group:
        out.append(f"{indent}ktx_welford_reduce<{p.group}>({k}_n, {k}_k, {k}_mean, {k}_m2);")
    out += [
        _lines(source, n.start_byte, n.end_byte, indent)
        for n in p.between
        if p.declaration is None or n.id != p.declaration.id
    ]
    c = p.center if p.center.isidentifier() else f"({p.center})"
    out += [
        f"{indent}// online: sum (x - c)^2 = M2 + n (mean - c)^2, c = {p.center} as the second loop had it",
        f"{indent}{p.v} += {k}_m2 + {k}_n * (({k}_k - {c}) + {k}_mean) * (({k}_k - {c}) + {k}_mean);",
    ]
    return "\n".join(out)


def _variance_forms(source: bytes, p: VariancePair) -> str:
    """ONLINE=2's sum pair, then (``#elif``) ONLINE=1's Welford: what :func:`wrap_lines` puts
    under ``#if KTX_ONLINE == 2`` before the original's ``#else``."""
    return f"{_sum_pair(source, p)}\n#elif {COND}\n{_welford(source, p)}"


def _sum_pair(source: bytes, p: VariancePair) -> str:
    """The first loop as written plus plain sums of what the second loop reads: the count, Σx and
    Σx². No value is carried from one iteration to the next but by ``+=``, so ``vectorize``
    packs the fused loop (Welford's running shift it must refuse); the double keeps the
    cancellation in ``Σx² - c (2 Σx - n c)`` harmless (relative 2^-53 (mean / spread)^2, see
    docs/passes.md) where a float pair loses every digit at mean = 1e4 spread. The count is an
    ``int``: exact, and its ``+= 1`` a element folds into one add a pack, where a double's cannot
    be reassociated (eight dependent double adds a 16-byte bf16 pack), and it takes one shuffle
    a butterfly step, not two (llm.c fused_residual v2 at 32 threads a row and 16-byte packs, sm_90
    PTX: 120 -> 81 double ops, 35 -> 30 shuffles)."""
    indent = syntax.indentation(source, p.first.start_byte)
    inner = indent + ("  " if len(indent) % 4 else "    ")
    for n in p.body:
        if not source[syntax.line_start(source, n.start_byte) : n.start_byte].strip():
            inner = syntax.indentation(source, n.start_byte)
            break
    t, k = PAIR_TYPE, f"ktx_{p.v}"
    out: list[str] = []
    if p.declaration is not None:
        out.append(_lines(source, p.declaration.start_byte, p.declaration.end_byte, indent))
    out += [
        f"{indent}// online (ONLINE=2): the count (int), sum and sum of squares of what {p.v} sums, in {t}",
        f"{indent}int {k}_n = 0;",
        f"{indent}{t} {k}_s1 = 0, {k}_s2 = 0;",
        f"{indent}{p.header} {{",
        *(_lines(source, n.start_byte, n.end_byte, inner) for n in p.body),
        f"{inner}// online: the element the sum of squares reads, into the sums",
        f"{inner}const {t} {k}_x = ({t})({p.element});  // not ktx_x: vectorize's pack of x",
        f"{inner}{k}_n += 1;",
        f"{inner}{k}_s1 += {k}_x;",
        f"{inner}{k}_s2 += {k}_x * {k}_x;",
        f"{indent}}}",
    ]
    if p.group:
        out.append(f"{indent}ktx_sum_pair_reduce<{p.group}>({k}_n, {k}_s1, {k}_s2);")
    out += [
        _lines(source, n.start_byte, n.end_byte, indent)
        for n in p.between
        if p.declaration is None or n.id != p.declaration.id
    ]
    c = f"({t})({p.center})"
    out += [
        f"{indent}// online: sum (x - c)^2 = Σx² - c (2 Σx - n c) in {t},"
        f" c = {p.center} as the second loop had it",
        f"{indent}{p.v} += ({p.v_type})({k}_s2 - {c} * (2 * {k}_s1 - {k}_n * {c}));",
    ]
    return "\n".join(out)
