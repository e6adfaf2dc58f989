// RUN: ktx apply --passes vectorize %s --diff 2>&1 | filecheck %s --match-full-lines
// RUN: ktx inspect --facts %s | filecheck %s --match-full-lines --check-prefix=FACTS
// llama.cpp-style rows under a 2-D block: a warp per row (x = WARP_SIZE), four rows per block
// (y). The loops step by WARP_SIZE, not blockDim.x; every launch's block x is WARP_SIZE, so the
// facts read WARP_SIZE as blockDim.x (a `block x` fact, which no block-size knob rewrites) and
// the loops are block-stride loops that vectorize packs.
#define WARP_SIZE 32

__global__ void scale_rows(const float* __restrict__ x, float* __restrict__ dst, const float* __restrict__ w,
                           const int ncols, const int nrows) {
  const int row = blockIdx.x * blockDim.y + threadIdx.y;
  if (row >= nrows) return;
  float sum = 0.0f;
  for (int col = threadIdx.x; col < ncols; col += WARP_SIZE) {
    sum += x[row * ncols + col];
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(0xffffffff, sum, offset, WARP_SIZE);
  for (int col = threadIdx.x; col < ncols; col += WARP_SIZE) {
    dst[row * ncols + col] = w[col] * x[row * ncols + col] / sum;
  }
}

void scale_rows_cuda(const float* x, float* dst, const float* w, const int ncols, const int nrows, cudaStream_t stream) {
  const dim3 block_dims(WARP_SIZE, 4, 1);
  const dim3 block_nums((nrows + 3) / 4, 1, 1);
  scale_rows<<<block_nums, block_dims, 0, stream>>>(x, dst, w, ncols, nrows);
}

// CHECK: {{.*}}: remark: [vectorize] L0: rewritten: exposed VEC_L0 {1, 2, 4}; packed 1 pointer(s): x
// CHECK: {{.*}}: remark: [vectorize] L1: skipped: the loop condition `offset > 0` is not `offset < n`
// CHECK: {{.*}}: remark: [vectorize] L2: rewritten: exposed VEC_L2 {1, 2, 4}; packed 3 pointer(s): dst, w, x
// CHECK: {{.*}}: remark: [vectorize] prelude: rewritten: rewritten; inserted the ktx device helpers (namespace ktx) after the includes
// CHECK: +// ktx:prelude -- device helpers for code rewritten by ktx passes (vectorize, cache-hints).
// CHECK: +namespace ktx {
// CHECK: +
// CHECK: +// The unsigned type one access of BYTES bytes moves.
// CHECK: +template <int BYTES> struct word;
// CHECK: +template <> struct word<1> { using type = unsigned char; };
// CHECK: +template <> struct word<2> { using type = unsigned short; };
// CHECK: +template <> struct word<4> { using type = unsigned int; };
// CHECK: +template <> struct word<8> { using type = uint2; };
// CHECK: +template <> struct word<16> { using type = uint4; };
// CHECK: +
// CHECK: +// N elements of T, aligned to their total size so that one instruction moves them.
// CHECK: +template <typename T, int N>
// CHECK: +struct alignas(sizeof(T) * N) pack {
// CHECK: +  T v[N];
// CHECK: +};
// CHECK: +
// CHECK: +// Whether p can be accessed N elements at a time (aligned to N * sizeof(T) bytes).
// CHECK: +template <int N, typename T>
// CHECK: +__device__ __forceinline__ bool aligned(const T* p) {
// CHECK: +  return reinterpret_cast<unsigned long long>(p) % (sizeof(T) * N) == 0;
// CHECK: +}
// CHECK: +
// CHECK: +// Elements from p to the next boundary of N elements (0 where p is on one, or is not even
// CHECK: +// aligned to its element), at most n: the scalar head of a peeled packed loop.
// CHECK: +template <int N, typename T, typename I>
// CHECK: +__device__ __forceinline__ I head(const T* p, I n) {
// CHECK: +  const unsigned long long a = reinterpret_cast<unsigned long long>(p);
// CHECK: +  if (a % sizeof(T) != 0) return I(0);
// CHECK: +  const I h = static_cast<I>((N - (a / sizeof(T)) % N) % N);
// CHECK: +  return h < n ? h : (n > I(0) ? n : I(0));
// CHECK: +}
// CHECK: +
// CHECK: +// Whether n elements from p and n from q share no byte (where the same array through both would
// CHECK: +// break a pack: the body writes through one and then reads or writes through the other).
// CHECK: +template <typename T, typename U>
// CHECK: +__device__ __forceinline__ bool disjoint(const T* p, const U* q, long long n) {
// CHECK: +  const unsigned long long a = reinterpret_cast<unsigned long long>(p);
// CHECK: +  const unsigned long long b = reinterpret_cast<unsigned long long>(q);
// CHECK: +  const unsigned long long m = n > 0 ? static_cast<unsigned long long>(n) : 0ULL;
// CHECK: +  return a + m * sizeof(T) <= b || b + m * sizeof(U) <= a;
// CHECK: +}
// CHECK: +
// CHECK: +// Whether n elements from p and n from q are the same elements or share no byte: where two
// CHECK: +// pointers the kernel indexes alike may alias (no __restrict__), packs are taken only then.
// CHECK: +template <typename T, typename U>
// CHECK: +__device__ __forceinline__ bool apart(const T* p, const U* q, long long n) {
// CHECK: +  const bool same = reinterpret_cast<const void*>(p) == reinterpret_cast<const void*>(q);
// CHECK: +  return (same && sizeof(T) == sizeof(U)) || disjoint(p, q, n);
// CHECK: +}
// CHECK: +
// CHECK: +// Read-only loads that are not kept in L1 (ld.global.nc.L1::no_allocate).
// CHECK: +__device__ __forceinline__ unsigned char load_na(const unsigned char* p) {
// CHECK: +  unsigned short r;
// CHECK: +  asm("ld.global.nc.L1::no_allocate.u8 %0, [%1];" : "=h"(r) : "l"(p));
// CHECK: +  return static_cast<unsigned char>(r);
// CHECK: +}
// CHECK: +__device__ __forceinline__ unsigned short load_na(const unsigned short* p) {
// CHECK: +  unsigned short r;
// CHECK: +  asm("ld.global.nc.L1::no_allocate.u16 %0, [%1];" : "=h"(r) : "l"(p));
// CHECK: +  return r;
// CHECK: +}
// CHECK: +__device__ __forceinline__ unsigned int load_na(const unsigned int* p) {
// CHECK: +  unsigned int r;
// CHECK: +  asm("ld.global.nc.L1::no_allocate.u32 %0, [%1];" : "=r"(r) : "l"(p));
// CHECK: +  return r;
// CHECK: +}
// CHECK: +__device__ __forceinline__ uint2 load_na(const uint2* p) {
// CHECK: +  uint2 r;
// CHECK: +  asm("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p));
// CHECK: +  return r;
// CHECK: +}
// CHECK: +__device__ __forceinline__ uint4 load_na(const uint4* p) {
// CHECK: +  uint4 r;
// CHECK: +  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
// CHECK: +      : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
// CHECK: +      : "l"(p));
// CHECK: +  return r;
// CHECK: +}
// CHECK: +
// CHECK: +// Any other type of 1 to 16 bytes, through the word of its size.
// CHECK: +template <typename W>
// CHECK: +__device__ __forceinline__ W load_na(const W* p) {
// CHECK: +  using U = typename word<sizeof(W)>::type;
// CHECK: +  const U u = load_na(reinterpret_cast<const U*>(p));
// CHECK: +  return *reinterpret_cast<const W*>(&u);
// CHECK: +}
// CHECK: +
// CHECK: +// One word with a cache policy. Load HINT: 0 plain, 1 __ldg, 2 __ldcs, 3 nc without L1.
// CHECK: +// Store HINT: 0 plain, 1 __stcs.
// CHECK: +template <int HINT, typename W>
// CHECK: +__device__ __forceinline__ W load_word(const W* p) {
// CHECK: +  if constexpr (HINT == 1) {
// CHECK: +    return __ldg(p);
// CHECK: +  } else if constexpr (HINT == 2) {
// CHECK: +    return __ldcs(p);
// CHECK: +  } else if constexpr (HINT == 3) {
// CHECK: +    return load_na(p);
// CHECK: +  } else {
// CHECK: +    return *p;
// CHECK: +  }
// CHECK: +}
// CHECK: +template <int HINT, typename W>
// CHECK: +__device__ __forceinline__ void store_word(W* p, const W& x) {
// CHECK: +  if constexpr (HINT == 1) {
// CHECK: +    __stcs(p, x);
// CHECK: +  } else {
// CHECK: +    *p = x;
// CHECK: +  }
// CHECK: +}
// CHECK: +
// CHECK: +// N elements from p (aligned<N>(p) must hold), and back.
// CHECK: +template <int N, int HINT = 0, typename T>
// CHECK: +__device__ __forceinline__ pack<T, N> load(const T* p) {
// CHECK: +  using W = typename word<sizeof(T) * N>::type;
// CHECK: +  pack<T, N> r;
// CHECK: +  *reinterpret_cast<W*>(r.v) = load_word<HINT>(reinterpret_cast<const W*>(p));
// CHECK: +  return r;
// CHECK: +}
// CHECK: +template <int HINT = 0, typename T, int N>
// CHECK: +__device__ __forceinline__ void store(T* p, const pack<T, N>& x) {
// CHECK: +  using W = typename word<sizeof(T) * N>::type;
// CHECK: +  store_word<HINT>(reinterpret_cast<W*>(p), *reinterpret_cast<const W*>(x.v));
// CHECK: +}
// CHECK: +
// CHECK: +// One element with a cache policy (scalar accesses that cache-hints rewrote).
// CHECK: +template <int HINT, typename T>
// CHECK: +__device__ __forceinline__ T ld(const T* p) {
// CHECK: +  using W = typename word<sizeof(T)>::type;
// CHECK: +  const W w = load_word<HINT>(reinterpret_cast<const W*>(p));
// CHECK: +  return *reinterpret_cast<const T*>(&w);
// CHECK: +}
// CHECK: +template <int HINT, typename T, typename U>
// CHECK: +__device__ __forceinline__ void st(T* p, U value) {  // by value: no ODR-use of a host constexpr
// CHECK: +  using W = typename word<sizeof(T)>::type;
// CHECK: +  const T x = value;  // the conversion `*p = value` would make
// CHECK: +  store_word<HINT>(reinterpret_cast<W*>(p), *reinterpret_cast<const W*>(&x));
// CHECK: +}
// CHECK: +
// CHECK: +}  // namespace ktx
// CHECK: +
// CHECK: +// ktx:knobs begin
// CHECK: +// scale_rows templated by `vectorize`.
// CHECK: +// Each KTX_ macro is a knob; the defaults reproduce the original. Pick other values with
// CHECK: +// `ktx apply --config NAME=VALUE` (clean code) or -DKTX_NAME=VALUE.
// CHECK: +#ifndef KTX_VEC_L0
// CHECK: +#define KTX_VEC_L0 1  // vectorize: elements per packed access in loop L0 (1: scalar, as written; x: 4 B)
// CHECK: +#endif
// CHECK: +#ifndef KTX_VEC_L2
// CHECK: +#define KTX_VEC_L2 1  // vectorize: elements per packed access in loop L2 (1: scalar, as written; dst: 4 B, w: 4 B, x: 4 B)
// CHECK: +#endif
// CHECK: +// ktx:knobs end
// CHECK: +#if KTX_VEC_L0 > 1
// CHECK: +  // VEC_L0: packed accesses where every packed row is aligned (checked here); the
// CHECK: +  // scalar loop after the packed one takes the elements past the last whole pack.
// CHECK: +  const int ktx_packs_L0 = (ktx::aligned<KTX_VEC_L0>(x + row * ncols)) ? ncols / KTX_VEC_L0 : 0;
// CHECK: +  for (int ktx_p = threadIdx.x; ktx_p < ktx_packs_L0; ktx_p += WARP_SIZE) {
// CHECK: +    const auto ktx_x = ktx::load<KTX_VEC_L0>(x + row * ncols + ktx_p * KTX_VEC_L0);
// CHECK: +#pragma unroll
// CHECK: +    for (int ktx_j = 0; ktx_j < KTX_VEC_L0; ++ktx_j) {
// CHECK: +      sum += ktx_x.v[ktx_j];
// CHECK: +    }
// CHECK: +  }
// CHECK: +  for (int col = ktx_packs_L0 * KTX_VEC_L0 + threadIdx.x; col < ncols; col += WARP_SIZE) {
// CHECK: +    sum += x[row * ncols + col];
// CHECK: +  }
// CHECK: +#else
// CHECK: +#endif
// CHECK: +#if KTX_VEC_L2 > 1
// CHECK: +  // VEC_L2: packed accesses where every packed row is aligned (checked here); the
// CHECK: +  // scalar loop after the packed one takes the elements past the last whole pack.
// CHECK: +  const int ktx_packs_L2 = (ktx::aligned<KTX_VEC_L2>(dst + row * ncols) &&
// CHECK: +                            ktx::aligned<KTX_VEC_L2>(w) &&
// CHECK: +                            ktx::aligned<KTX_VEC_L2>(x + row * ncols)) ? ncols / KTX_VEC_L2 : 0;
// CHECK: +  for (int ktx_p = threadIdx.x; ktx_p < ktx_packs_L2; ktx_p += WARP_SIZE) {
// CHECK: +    ktx::pack<float, KTX_VEC_L2> ktx_dst;
// CHECK: +    const auto ktx_w = ktx::load<KTX_VEC_L2>(w + ktx_p * KTX_VEC_L2);
// CHECK: +    const auto ktx_x = ktx::load<KTX_VEC_L2>(x + row * ncols + ktx_p * KTX_VEC_L2);
// CHECK: +#pragma unroll
// CHECK: +    for (int ktx_j = 0; ktx_j < KTX_VEC_L2; ++ktx_j) {
// CHECK: +      ktx_dst.v[ktx_j] = ktx_w.v[ktx_j] * ktx_x.v[ktx_j] / sum;
// CHECK: +    }
// CHECK: +    ktx::store(dst + row * ncols + ktx_p * KTX_VEC_L2, ktx_dst);
// CHECK: +  }
// CHECK: +  for (int col = ktx_packs_L2 * KTX_VEC_L2 + threadIdx.x; col < ncols; col += WARP_SIZE) {
// CHECK: +    dst[row * ncols + col] = w[col] * x[row * ncols + col] / sum;
// CHECK: +  }
// CHECK: +#else
// CHECK: +#endif
// FACTS: kernel scale_rows (line 9)
// FACTS:   launch: line 27 <<<block_nums, block_dims>>>
// FACTS:   block x: WARP_SIZE is blockDim.x (define = 32, not a knob)
// FACTS:   loop L0 line 14 depth 0: col from threadIdx.x step blockDim.x while col < ncols; owner block, partitions
// FACTS:   loop L1 line 18 depth 0: offset from 16 step ? while offset > 0; owner unknown
// FACTS:   loop L2 line 19 depth 0: col from threadIdx.x step blockDim.x while col < ncols; owner block, partitions
// FACTS:   ref line 15: load x[row * ncols + col] root x index blockDim.y*blockIdx.x*ncols + col + ncols*threadIdx.y elt float 4B unconditional alias restrict:x loop L0
// FACTS:   ref line 20: store dst[row * ncols + col] root dst index blockDim.y*blockIdx.x*ncols + col + ncols*threadIdx.y elt float 4B unconditional alias restrict:dst loop L2
// FACTS:   ref line 20: load w[col] root w index col elt float 4B unconditional alias restrict:w loop L2
// FACTS:   ref line 20: load x[row * ncols + col] root x index blockDim.y*blockIdx.x*ncols + col + ncols*threadIdx.y elt float 4B unconditional alias restrict:x loop L2
// FACTS:   reduction: sum sum over the loop at line 14 (line 15)
// FACTS:   pack L0: x (4B)
// FACTS:   pack L1: no, the loop condition `offset > 0` is not `offset < n`
// FACTS:   pack L2: dst (4B), w (4B), x (4B)
