"""Device helpers that rewritten code calls, inserted once into the file (the "prelude").

``vectorize`` moves N elements with one instruction and ``cache-hints`` picks the cache policy
of a load or store. Both need a little device code that depends on the access width, which a
knob chooses: writing it out at every use would make templates unreadable, so it lives once in a
``namespace ktx`` block placed after the file's leading ``#include`` lines::

    const auto ktx_x = ktx::load<KTX_VEC_L0>(x + p * KTX_VEC_L0);   // one 16-byte load for 8 bf16
    ktx::store<KTX_CACHE_ST_OUT>(out + p * KTX_VEC_L0, o);          // streaming store when 1

The block starts with :data:`MARKER`; a pass inserts it only when the file does not hold it
yet, through a :class:`PreludeSite` yielded after its other sites (so a pass whose sites were
all refused adds nothing). The helpers use only what NVRTC provides without headers
(``uint2``/``uint4``, ``__ldg``, ``__ldcs``, ``__stcs``, inline PTX).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ktx.ir import Module

from ktx.passbase import Rewriter, Site, Target

MARKER = "// ktx:prelude"

#: Cache policies of a load (the ``HINT`` of ``ktx::load``/``ktx::ld``).
LOAD_HINTS = {
    0: "plain load",
    1: "__ldg: read-only data path (ld.global.nc)",
    2: "__ldcs: streaming, evict first (ld.global.cs)",
    3: "ld.global.nc.L1::no_allocate: read-only, not kept in L1",
}
#: Cache policies of a store (the ``HINT`` of ``ktx::store``/``ktx::st``).
STORE_HINTS = {0: "plain store", 1: "__stcs: streaming, evict first (st.global.cs)"}

PRELUDE = """\
// ktx:prelude -- device helpers for code rewritten by ktx passes (vectorize, cache-hints).
namespace ktx {

// The unsigned type one access of BYTES bytes moves.
template <int BYTES> struct word;
template <> struct word<1> { using type = unsigned char; };
template <> struct word<2> { using type = unsigned short; };
template <> struct word<4> { using type = unsigned int; };
template <> struct word<8> { using type = uint2; };
template <> struct word<16> { using type = uint4; };

// N elements of T, aligned to their total size so that one instruction moves them.
template <typename T, int N>
struct alignas(sizeof(T) * N) pack {
  T v[N];
};

// Whether p can be accessed N elements at a time (aligned to N * sizeof(T) bytes).
template <int N, typename T>
__device__ __forceinline__ bool aligned(const T* p) {
  return reinterpret_cast<unsigned long long>(p) % (sizeof(T) * N) == 0;
}

// Elements from p to the next boundary of N elements (0 where p is on one, or is not even
// aligned to its element), at most n: the scalar head of a peeled packed loop.
template <int N, typename T, typename I>
__device__ __forceinline__ I head(const T* p, I n) {
  const unsigned long long a = reinterpret_cast<unsigned long long>(p);
  if (a % sizeof(T) != 0) return I(0);
  const I h = static_cast<I>((N - (a / sizeof(T)) % N) % N);
  return h < n ? h : (n > I(0) ? n : I(0));
}

// Whether n elements from p and n from q share no byte (where the same array through both would
// break a pack: the body writes through one and then reads or writes through the other).
template <typename T, typename U>
__device__ __forceinline__ bool disjoint(const T* p, const U* q, long long n) {
  const unsigned long long a = reinterpret_cast<unsigned long long>(p);
  const unsigned long long b = reinterpret_cast<unsigned long long>(q);
  const unsigned long long m = n > 0 ? static_cast<unsigned long long>(n) : 0ULL;
  return a + m * sizeof(T) <= b || b + m * sizeof(U) <= a;
}

// Whether n elements from p and n from q are the same elements or share no byte: where two
// pointers the kernel indexes alike may alias (no __restrict__), packs are taken only then.
template <typename T, typename U>
__device__ __forceinline__ bool apart(const T* p, const U* q, long long n) {
  const bool same = reinterpret_cast<const void*>(p) == reinterpret_cast<const void*>(q);
  return (same && sizeof(T) == sizeof(U)) || disjoint(p, q, n);
}

// Read-only loads that are not kept in L1 (ld.global.nc.L1::no_allocate).
__device__ __forceinline__ unsigned char load_na(const unsigned char* p) {
  unsigned short r;
  asm("ld.global.nc.L1::no_allocate.u8 %0, [%1];" : "=h"(r) : "l"(p));
  return static_cast<unsigned char>(r);
}
__device__ __forceinline__ unsigned short load_na(const unsigned short* p) {
  unsigned short r;
  asm("ld.global.nc.L1::no_allocate.u16 %0, [%1];" : "=h"(r) : "l"(p));
  return r;
}
__device__ __forceinline__ unsigned int load_na(const unsigned int* p) {
  unsigned int r;
  asm("ld.global.nc.L1::no_allocate.u32 %0, [%1];" : "=r"(r) : "l"(p));
  return r;
}
__device__ __forceinline__ uint2 load_na(const uint2* p) {
  uint2 r;
  asm("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p));
  return r;
}
__device__ __forceinline__ uint4 load_na(const uint4* p) {
  uint4 r;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
      : "l"(p));
  return r;
}

// Any other type of 1 to 16 bytes, through the word of its size.
template <typename W>
__device__ __forceinline__ W load_na(const W* p) {
  using U = typename word<sizeof(W)>::type;
  const U u = load_na(reinterpret_cast<const U*>(p));
  return *reinterpret_cast<const W*>(&u);
}

// One word with a cache policy. Load HINT: 0 plain, 1 __ldg, 2 __ldcs, 3 nc without L1.
// Store HINT: 0 plain, 1 __stcs.
template <int HINT, typename W>
__device__ __forceinline__ W load_word(const W* p) {
  if constexpr (HINT == 1) {
    return __ldg(p);
  } else if constexpr (HINT == 2) {
    return __ldcs(p);
  } else if constexpr (HINT == 3) {
    return load_na(p);
  } else {
    return *p;
  }
}
template <int HINT, typename W>
__device__ __forceinline__ void store_word(W* p, const W& x) {
  if constexpr (HINT == 1) {
    __stcs(p, x);
  } else {
    *p = x;
  }
}

// N elements from p (aligned<N>(p) must hold), and back.
template <int N, int HINT = 0, typename T>
__device__ __forceinline__ pack<T, N> load(const T* p) {
  using W = typename word<sizeof(T) * N>::type;
  pack<T, N> r;
  *reinterpret_cast<W*>(r.v) = load_word<HINT>(reinterpret_cast<const W*>(p));
  return r;
}
template <int HINT = 0, typename T, int N>
__device__ __forceinline__ void store(T* p, const pack<T, N>& x) {
  using W = typename word<sizeof(T) * N>::type;
  store_word<HINT>(reinterpret_cast<W*>(p), *reinterpret_cast<const W*>(x.v));
}

// One element with a cache policy (scalar accesses that cache-hints rewrote).
template <int HINT, typename T>
__device__ __forceinline__ T ld(const T* p) {
  using W = typename word<sizeof(T)>::type;
  const W w = load_word<HINT>(reinterpret_cast<const W*>(p));
  return *reinterpret_cast<const T*>(&w);
}
template <int HINT, typename T, typename U>
__device__ __forceinline__ void st(T* p, U value) {  // by value: no ODR-use of a host constexpr
  using W = typename word<sizeof(T)>::type;
  const T x = value;  // the conversion `*p = value` would make
  store_word<HINT>(reinterpret_cast<W*>(p), *reinterpret_cast<const W*>(&x));
}

}  // namespace ktx
"""


@dataclass(frozen=True)
class PreludeSite(Site):
    """Where the helper block goes: after the leading ``#include`` lines."""

    offset: int


def has_prelude(module: Module) -> bool:
    """Whether the file holds the helpers: the marker opening a line, then ``namespace ktx {``."""
    return (
        re.search(rb"(?m)^" + re.escape(MARKER.encode()) + rb".*\r?\nnamespace ktx \{", module.source)
        is not None
    )


def prelude_offset(module: Module, before: int) -> int:
    """The offset for the prelude: after the last top-level ``#include`` that precedes ``before``.

    Without one, the start of the line of the first top-level declaration (anything after the
    includes can then use the helpers: device functions before the kernel included).
    """
    root = module.tree.root_node
    last_include = None
    first_code = None
    for child in root.children:
        if child.start_byte >= before:
            break
        if child.type == "preproc_include":
            last_include = child
        elif first_code is None and child.type not in ("comment", "preproc_include", "preproc_def"):
            first_code = child
    if last_include is not None:
        end = last_include.end_byte
        nl = module.source.find(b"\n", end - 1)
        return len(module.source) if nl < 0 else nl + 1
    start = first_code.start_byte if first_code is not None else before
    return module.source.rfind(b"\n", 0, start) + 1


def prelude_site(target: Target) -> PreludeSite | None:
    """The prelude site for ``target``, or None when the file already has the helpers."""
    if has_prelude(target.module):
        return None
    at = prelude_offset(target.module, target.kernel.span.start)
    return PreludeSite("prelude", target.module.span(at, at), at)


def insert_prelude(site: PreludeSite, rw: Rewriter) -> None:
    source = rw.target.module.source
    newline = "\r\n" if b"\r\n" in source else "\n"
    text = PRELUDE.replace("\n", newline)
    before = source[max(0, site.offset - 2) : site.offset]
    lead = "" if before.endswith(b"\n\n") or site.offset == 0 else newline
    rw.insert(site.offset, lead + text + newline)
    rw.note("inserted the ktx device helpers (namespace ktx) after the includes")
