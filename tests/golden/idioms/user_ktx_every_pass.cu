// Every pass, instantiated with --sample, on a file whose own macros are named KTX_*: the
// user's KTX_HOLDOUT_WARP and KTX_ROWS stay code (no 'placeholder ... has no value', no
// 'already the knob HOLDOUT_WARP'), and every instantiation keeps them as written.
// RUN: ktx apply --passes block-size %s --sample 1 --diff 2>&1 | filecheck %s --match-full-lines --check-prefix=BLOCK_SIZE
// RUN: ktx apply --passes cache-hints %s --sample 1 --diff 2>&1 | filecheck %s --match-full-lines --check-prefix=CACHE_HINTS
// RUN: ktx apply --passes cluster-rows %s --sample 1 --diff 2>&1 | filecheck %s --match-full-lines --check-prefix=CLUSTER_ROWS
// RUN: ktx apply --passes coarsen %s --sample 1 --diff 2>&1 | filecheck %s --match-full-lines --check-prefix=COARSEN
// RUN: ktx apply --passes early-loads %s --sample 1 --diff 2>&1 | filecheck %s --match-full-lines --check-prefix=EARLY_LOADS
// RUN: ktx apply --passes expose %s --sample 1 --diff 2>&1 | filecheck %s --match-full-lines --check-prefix=EXPOSE
// RUN: ktx apply --passes fast-math %s --sample 1 --diff 2>&1 | filecheck %s --match-full-lines --check-prefix=FAST_MATH
// RUN: ktx apply --passes hoist %s --sample 1 --diff 2>&1 | filecheck %s --match-full-lines --check-prefix=HOIST
// RUN: ktx apply --passes launch-bounds %s --sample 1 --diff 2>&1 | filecheck %s --match-full-lines --check-prefix=LAUNCH_BOUNDS
// RUN: ktx apply --passes loads-first %s --sample 1 --diff 2>&1 | filecheck %s --match-full-lines --check-prefix=LOADS_FIRST
// RUN: ktx apply --passes row-owner %s --sample 1 --diff 2>&1 | filecheck %s --match-full-lines --check-prefix=ROW_OWNER
// RUN: ktx apply --passes rows-per-block %s --sample 1 --diff 2>&1 | filecheck %s --match-full-lines --check-prefix=ROWS_PER_BLOCK
// RUN: ktx apply --passes split %s --sample 1 --diff 2>&1 | filecheck %s --match-full-lines --check-prefix=SPLIT
// RUN: ktx apply --passes tile %s --sample 1 --diff 2>&1 | filecheck %s --match-full-lines --check-prefix=TILE
// RUN: ktx apply --passes unroll %s --sample 1 --diff 2>&1 | filecheck %s --match-full-lines --check-prefix=UNROLL
// RUN: ktx apply --passes vectorize %s --sample 1 --diff 2>&1 | filecheck %s --match-full-lines --check-prefix=VECTORIZE
// RUN: ktx apply --passes warp-reduce %s --sample 1 --diff 2>&1 | filecheck %s --match-full-lines --check-prefix=WARP_REDUCE
#include <cuda_bf16.h>
#define KTX_HOLDOUT_WARP 32
#define KTX_ROWS 4
__global__ void row_scale(float* out, const float* in, int rows, int d) {
  int row = blockIdx.x * KTX_ROWS + threadIdx.y;
  if (row >= rows) return;
  float acc = 0.f;
  for (int i = threadIdx.x; i < d; i += blockDim.x) acc += in[row * d + i] * in[row * d + i];
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffff, acc, o);
#pragma unroll 4
  for (int i = threadIdx.x; i < d; i += blockDim.x) out[row * d + i] = in[row * d + i] * rsqrtf(acc / d + 1e-6f);
}
void launch(float* out, const float* in, int rows, int d) {
  dim3 block(KTX_HOLDOUT_WARP, KTX_ROWS);
  row_scale<<<(rows + KTX_ROWS - 1) / KTX_ROWS, block>>>(out, in, rows, d);
}

// BLOCK_SIZE: {{.*}}: remark: [block-size] row_scale: rewritten: exposed BLOCK_Y {0, 1, 2, 4, 8, 16, 32}; x stays 32: the kernel shuffles across the lanes of a warp along x; launch mapping: 4 -> BLOCK_Y in grid[0], block[1]
// BLOCK_SIZE: +// ktx: `block-size` instantiated with BLOCK_Y=1
// BLOCK_SIZE: -__global__ void row_scale(float* out, const float* in, int rows, int d) {
// BLOCK_SIZE: +__global__ void __launch_bounds__(32) row_scale(float* out, const float* in, int rows, int d) {
// BLOCK_SIZE: -  dim3 block(KTX_HOLDOUT_WARP, KTX_ROWS);
// BLOCK_SIZE: +  dim3 block(KTX_HOLDOUT_WARP, 1);
// CACHE_HINTS: {{.*}}: remark: [cache-hints] in:load: skipped: loads of in: not __restrict__, and the kernel writes out, which may alias it
// CACHE_HINTS: {{.*}}: remark: [cache-hints] out:store: rewritten: exposed CACHE_ST_OUT {0, 1}; 1 access(es)
// CACHE_HINTS: {{.*}}: remark: [cache-hints] prelude: rewritten: rewritten; inserted the ktx device helpers (namespace ktx) after the includes
// CACHE_HINTS: +// ktx: `cache-hints` instantiated with CACHE_ST_OUT=0
// CACHE_HINTS: +
// CACHE_HINTS: +// ktx:prelude -- device helpers for code rewritten by ktx passes (vectorize, cache-hints).
// CACHE_HINTS: +namespace ktx {
// CACHE_HINTS: +
// CACHE_HINTS: +// The unsigned type one access of BYTES bytes moves.
// CACHE_HINTS: +template <int BYTES> struct word;
// CACHE_HINTS: +template <> struct word<1> { using type = unsigned char; };
// CACHE_HINTS: +template <> struct word<2> { using type = unsigned short; };
// CACHE_HINTS: +template <> struct word<4> { using type = unsigned int; };
// CACHE_HINTS: +template <> struct word<8> { using type = uint2; };
// CACHE_HINTS: +template <> struct word<16> { using type = uint4; };
// CACHE_HINTS: +
// CACHE_HINTS: +// N elements of T, aligned to their total size so that one instruction moves them.
// CACHE_HINTS: +template <typename T, int N>
// CACHE_HINTS: +struct alignas(sizeof(T) * N) pack {
// CACHE_HINTS: +  T v[N];
// CACHE_HINTS: +};
// CACHE_HINTS: +
// CACHE_HINTS: +// Whether p can be accessed N elements at a time (aligned to N * sizeof(T) bytes).
// CACHE_HINTS: +template <int N, typename T>
// CACHE_HINTS: +__device__ __forceinline__ bool aligned(const T* p) {
// CACHE_HINTS: +  return reinterpret_cast<unsigned long long>(p) % (sizeof(T) * N) == 0;
// CACHE_HINTS: +}
// CACHE_HINTS: +
// CACHE_HINTS: +// Elements from p to the next boundary of N elements (0 where p is on one, or is not even
// CACHE_HINTS: +// aligned to its element), at most n: the scalar head of a peeled packed loop.
// CACHE_HINTS: +template <int N, typename T, typename I>
// CACHE_HINTS: +__device__ __forceinline__ I head(const T* p, I n) {
// CACHE_HINTS: +  const unsigned long long a = reinterpret_cast<unsigned long long>(p);
// CACHE_HINTS: +  if (a % sizeof(T) != 0) return I(0);
// CACHE_HINTS: +  const I h = static_cast<I>((N - (a / sizeof(T)) % N) % N);
// CACHE_HINTS: +  return h < n ? h : (n > I(0) ? n : I(0));
// CACHE_HINTS: +}
// CACHE_HINTS: +
// CACHE_HINTS: +// Whether n elements from p and n from q share no byte (where the same array through both would
// CACHE_HINTS: +// break a pack: the body writes through one and then reads or writes through the other).
// CACHE_HINTS: +template <typename T, typename U>
// CACHE_HINTS: +__device__ __forceinline__ bool disjoint(const T* p, const U* q, long long n) {
// CACHE_HINTS: +  const unsigned long long a = reinterpret_cast<unsigned long long>(p);
// CACHE_HINTS: +  const unsigned long long b = reinterpret_cast<unsigned long long>(q);
// CACHE_HINTS: +  const unsigned long long m = n > 0 ? static_cast<unsigned long long>(n) : 0ULL;
// CACHE_HINTS: +  return a + m * sizeof(T) <= b || b + m * sizeof(U) <= a;
// CACHE_HINTS: +}
// CACHE_HINTS: +
// CACHE_HINTS: +// Whether n elements from p and n from q are the same elements or share no byte: where two
// CACHE_HINTS: +// pointers the kernel indexes alike may alias (no __restrict__), packs are taken only then.
// CACHE_HINTS: +template <typename T, typename U>
// CACHE_HINTS: +__device__ __forceinline__ bool apart(const T* p, const U* q, long long n) {
// CACHE_HINTS: +  const bool same = reinterpret_cast<const void*>(p) == reinterpret_cast<const void*>(q);
// CACHE_HINTS: +  return (same && sizeof(T) == sizeof(U)) || disjoint(p, q, n);
// CACHE_HINTS: +}
// CACHE_HINTS: +
// CACHE_HINTS: +// Read-only loads that are not kept in L1 (ld.global.nc.L1::no_allocate).
// CACHE_HINTS: +__device__ __forceinline__ unsigned char load_na(const unsigned char* p) {
// CACHE_HINTS: +  unsigned short r;
// CACHE_HINTS: +  asm("ld.global.nc.L1::no_allocate.u8 %0, [%1];" : "=h"(r) : "l"(p));
// CACHE_HINTS: +  return static_cast<unsigned char>(r);
// CACHE_HINTS: +}
// CACHE_HINTS: +__device__ __forceinline__ unsigned short load_na(const unsigned short* p) {
// CACHE_HINTS: +  unsigned short r;
// CACHE_HINTS: +  asm("ld.global.nc.L1::no_allocate.u16 %0, [%1];" : "=h"(r) : "l"(p));
// CACHE_HINTS: +  return r;
// CACHE_HINTS: +}
// CACHE_HINTS: +__device__ __forceinline__ unsigned int load_na(const unsigned int* p) {
// CACHE_HINTS: +  unsigned int r;
// CACHE_HINTS: +  asm("ld.global.nc.L1::no_allocate.u32 %0, [%1];" : "=r"(r) : "l"(p));
// CACHE_HINTS: +  return r;
// CACHE_HINTS: +}
// CACHE_HINTS: +__device__ __forceinline__ uint2 load_na(const uint2* p) {
// CACHE_HINTS: +  uint2 r;
// CACHE_HINTS: +  asm("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p));
// CACHE_HINTS: +  return r;
// CACHE_HINTS: +}
// CACHE_HINTS: +__device__ __forceinline__ uint4 load_na(const uint4* p) {
// CACHE_HINTS: +  uint4 r;
// CACHE_HINTS: +  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
// CACHE_HINTS: +      : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
// CACHE_HINTS: +      : "l"(p));
// CACHE_HINTS: +  return r;
// CACHE_HINTS: +}
// CACHE_HINTS: +
// CACHE_HINTS: +// Any other type of 1 to 16 bytes, through the word of its size.
// CACHE_HINTS: +template <typename W>
// CACHE_HINTS: +__device__ __forceinline__ W load_na(const W* p) {
// CACHE_HINTS: +  using U = typename word<sizeof(W)>::type;
// CACHE_HINTS: +  const U u = load_na(reinterpret_cast<const U*>(p));
// CACHE_HINTS: +  return *reinterpret_cast<const W*>(&u);
// CACHE_HINTS: +}
// CACHE_HINTS: +
// CACHE_HINTS: +// One word with a cache policy. Load HINT: 0 plain, 1 __ldg, 2 __ldcs, 3 nc without L1.
// CACHE_HINTS: +// Store HINT: 0 plain, 1 __stcs.
// CACHE_HINTS: +template <int HINT, typename W>
// CACHE_HINTS: +__device__ __forceinline__ W load_word(const W* p) {
// CACHE_HINTS: +  if constexpr (HINT == 1) {
// CACHE_HINTS: +    return __ldg(p);
// CACHE_HINTS: +  } else if constexpr (HINT == 2) {
// CACHE_HINTS: +    return __ldcs(p);
// CACHE_HINTS: +  } else if constexpr (HINT == 3) {
// CACHE_HINTS: +    return load_na(p);
// CACHE_HINTS: +  } else {
// CACHE_HINTS: +    return *p;
// CACHE_HINTS: +  }
// CACHE_HINTS: +}
// CACHE_HINTS: +template <int HINT, typename W>
// CACHE_HINTS: +__device__ __forceinline__ void store_word(W* p, const W& x) {
// CACHE_HINTS: +  if constexpr (HINT == 1) {
// CACHE_HINTS: +    __stcs(p, x);
// CACHE_HINTS: +  } else {
// CACHE_HINTS: +    *p = x;
// CACHE_HINTS: +  }
// CACHE_HINTS: +}
// CACHE_HINTS: +
// CACHE_HINTS: +// N elements from p (aligned<N>(p) must hold), and back.
// CACHE_HINTS: +template <int N, int HINT = 0, typename T>
// CACHE_HINTS: +__device__ __forceinline__ pack<T, N> load(const T* p) {
// CACHE_HINTS: +  using W = typename word<sizeof(T) * N>::type;
// CACHE_HINTS: +  pack<T, N> r;
// CACHE_HINTS: +  *reinterpret_cast<W*>(r.v) = load_word<HINT>(reinterpret_cast<const W*>(p));
// CACHE_HINTS: +  return r;
// CACHE_HINTS: +}
// CACHE_HINTS: +template <int HINT = 0, typename T, int N>
// CACHE_HINTS: +__device__ __forceinline__ void store(T* p, const pack<T, N>& x) {
// CACHE_HINTS: +  using W = typename word<sizeof(T) * N>::type;
// CACHE_HINTS: +  store_word<HINT>(reinterpret_cast<W*>(p), *reinterpret_cast<const W*>(x.v));
// CACHE_HINTS: +}
// CACHE_HINTS: +
// CACHE_HINTS: +// One element with a cache policy (scalar accesses that cache-hints rewrote).
// CACHE_HINTS: +template <int HINT, typename T>
// CACHE_HINTS: +__device__ __forceinline__ T ld(const T* p) {
// CACHE_HINTS: +  using W = typename word<sizeof(T)>::type;
// CACHE_HINTS: +  const W w = load_word<HINT>(reinterpret_cast<const W*>(p));
// CACHE_HINTS: +  return *reinterpret_cast<const T*>(&w);
// CACHE_HINTS: +}
// CACHE_HINTS: +template <int HINT, typename T, typename U>
// CACHE_HINTS: +__device__ __forceinline__ void st(T* p, U value) {  // by value: no ODR-use of a host constexpr
// CACHE_HINTS: +  using W = typename word<sizeof(T)>::type;
// CACHE_HINTS: +  const T x = value;  // the conversion `*p = value` would make
// CACHE_HINTS: +  store_word<HINT>(reinterpret_cast<W*>(p), *reinterpret_cast<const W*>(&x));
// CACHE_HINTS: +}
// CACHE_HINTS: +
// CACHE_HINTS: +}  // namespace ktx
// CACHE_HINTS: +
// CACHE_HINTS: -  for (int i = threadIdx.x; i < d; i += blockDim.x) out[row * d + i] = in[row * d + i] * rsqrtf(acc / d + 1e-6f);
// CACHE_HINTS: +  for (int i = threadIdx.x; i < d; i += blockDim.x) ktx::st<0>(&out[row * d + i], in[row * d + i] * rsqrtf(acc / d + 1e-6f));
// CLUSTER_ROWS: {{.*}}: remark: [cluster-rows] row_scale: skipped: no __syncthreads() between the row loop that accumulates acc (line 28) and the rest of the row: the reduction is not block-wide
// CLUSTER_ROWS-NOT: {{[-+].*}}
// COARSEN: {{.*}}: remark: [coarsen] row_scale: skipped: no global thread index (i = blockIdx.x * blockDim.x + threadIdx.x) and no grid-stride loop; kernels with one row per block can use split
// COARSEN-NOT: {{[-+].*}}
// EARLY_LOADS: {{.*}}: remark: [early-loads] row_scale: skipped: L1: loop L1's condition is not o < n; L2: loop L2's body is not a block
// EARLY_LOADS-NOT: {{[-+].*}}
// EXPOSE: {{.*}}: remark: [expose] KTX_HOLDOUT_WARP: skipped: KTX_HOLDOUT_WARP is the warp size, fixed by the hardware
// EXPOSE: {{.*}}: remark: [expose] KTX_ROWS: rewritten: exposed KTX_ROWS {1, 2, 4, 8, 16}; launch mapping: 4 -> KTX_ROWS in grid[0], block[1]
// EXPOSE: +// ktx: `expose` instantiated with KTX_ROWS=2
// EXPOSE: -#define KTX_ROWS 4
// EXPOSE: +#define KTX_ROWS 2
// FAST_MATH: {{.*}}: remark: [fast-math] row_scale: skipped: no expf/logf/sinf/..., 1/sqrtf or float division in the kernel or the device functions it calls
// FAST_MATH-NOT: {{[-+].*}}
// HOIST: {{.*}}: remark: [hoist] row_scale: rewritten: rewritten; 1 value(s): rsqrtf(acc / d + 1e-6f)
// HOIST: +const float ktx_h0 = rsqrtf(acc / d + 1e-6f);  // hoist: invariant in L2
// HOIST: -  for (int i = threadIdx.x; i < d; i += blockDim.x) out[row * d + i] = in[row * d + i] * rsqrtf(acc / d + 1e-6f);
// HOIST: +  for (int i = threadIdx.x; i < d; i += blockDim.x) out[row * d + i] = in[row * d + i] * ktx_h0;
// LAUNCH_BOUNDS: {{.*}}: remark: [block-size] row_scale: rewritten: exposed BLOCK_Y {0, 1, 2, 4, 8, 16, 32}; x stays 32: the kernel shuffles across the lanes of a warp along x; launch mapping: 4 -> BLOCK_Y in grid[0], block[1]
// LAUNCH_BOUNDS: {{.*}}: remark: [launch-bounds] row_scale: rewritten: exposed MIN_BLOCKS {0, 1, 2, 3, 4, 6, 8}
// LAUNCH_BOUNDS: +// ktx: `block-size,launch-bounds` instantiated with BLOCK_Y=1, MIN_BLOCKS=4
// LAUNCH_BOUNDS: -__global__ void row_scale(float* out, const float* in, int rows, int d) {
// LAUNCH_BOUNDS: +__global__ void __launch_bounds__(32, 4) row_scale(float* out, const float* in, int rows, int d) {
// LAUNCH_BOUNDS: -  dim3 block(KTX_HOLDOUT_WARP, KTX_ROWS);
// LAUNCH_BOUNDS: +  dim3 block(KTX_HOLDOUT_WARP, 1);
// LOADS_FIRST: {{.*}}: remark: [loads-first] row_scale: skipped: no straight-line load to issue earlier
// LOADS_FIRST-NOT: {{[-+].*}}
// ROW_OWNER: {{.*}}: remark: [row-owner] row_scale: skipped: the kernel reads threadIdx.y (line 25) and blockIdx.x (line 25), but no thread index (blockIdx.x * blockDim.x + threadIdx.x) names the row: not a thread-per-row kernel
// ROW_OWNER-NOT: {{[-+].*}}
// ROWS_PER_BLOCK: {{.*}}: remark: [rows-per-block] row_scale: skipped: the kernel reads threadIdx.y: its blocks are already more than one row
// ROWS_PER_BLOCK-NOT: {{[-+].*}}
// SPLIT: {{.*}}: remark: [split] L0: skipped: loop L0 accumulates acc across the row, and the kernel combines it across the block after the loop (__shfl_xor_sync at line 29): split over blocks, each block would reduce only part of the row
// SPLIT: {{.*}}: remark: [split] row_scale: skipped: not split: loop(s) L0 cannot be split, and the row loops of a kernel are split together
// SPLIT-NOT: {{[-+].*}}
// TILE: {{.*}}: remark: [tile] L0: rewritten: exposed TILE_L0 {1, 2, 4, 8}
// TILE: {{.*}}: remark: [tile] L1: skipped: the condition is not o < bound
// TILE: {{.*}}: remark: [tile] L2: rewritten: exposed TILE_L2 {1, 2, 4, 8}
// TILE: +// ktx: `tile` instantiated with TILE_L0=2, TILE_L2=1
// TILE: -  for (int i = threadIdx.x; i < d; i += blockDim.x) acc += in[row * d + i] * in[row * d + i];
// TILE: +  for (int ktx_tile_L0 = threadIdx.x; ktx_tile_L0 < d; ktx_tile_L0 += blockDim.x * 2) {
// TILE: +#pragma unroll
// TILE: +    for (int ktx_j_L0 = 0; ktx_j_L0 < 2; ++ktx_j_L0) {
// TILE: +      const int i = ktx_tile_L0 + ktx_j_L0 * blockDim.x;
// TILE: +      if (!(i < d)) break;
// TILE: +      acc += in[row * d + i] * in[row * d + i];
// TILE: +    }
// TILE: +  }
// TILE: -  for (int i = threadIdx.x; i < d; i += blockDim.x) out[row * d + i] = in[row * d + i] * rsqrtf(acc / d + 1e-6f);
// TILE: +  for (int ktx_tile_L2 = threadIdx.x; ktx_tile_L2 < d; ktx_tile_L2 += blockDim.x * 1) {
// TILE: +#pragma unroll
// TILE: +    for (int ktx_j_L2 = 0; ktx_j_L2 < 1; ++ktx_j_L2) {
// TILE: +      const int i = ktx_tile_L2 + ktx_j_L2 * blockDim.x;
// TILE: +      if (!(i < d)) break;
// TILE: +      out[row * d + i] = in[row * d + i] * rsqrtf(acc / d + 1e-6f);
// TILE: +    }
// TILE: +  }
// UNROLL: {{.*}}: remark: [unroll] L0: rewritten: exposed UNROLL_L0 {0, 1, 2, 4, 8}
// UNROLL: {{.*}}: remark: [unroll] L1: rewritten: exposed UNROLL_L1 {0, 1, 2, 4, 8}
// UNROLL: {{.*}}: remark: [unroll] L2: rewritten: exposed UNROLL_L2 {0, 1, 2, 4, 8}
// UNROLL: +// ktx: `unroll` instantiated with UNROLL_L0=1, UNROLL_L1=8, UNROLL_L2=0
// UNROLL: +  #pragma unroll 1
// UNROLL: +  #pragma unroll 8
// UNROLL: -#pragma unroll 4
// VECTORIZE: {{.*}}: remark: [vectorize] L0: rewritten: exposed VEC_L0 {1, 2, 4}; packed 1 pointer(s): in
// VECTORIZE: {{.*}}: remark: [vectorize] L1: skipped: the loop condition `o > 0` is not `o < n`
// VECTORIZE: {{.*}}: remark: [vectorize] L2: rewritten: exposed VEC_L2 {1, 2, 4}; packed 2 pointer(s): in, out; out and in may alias: packed only where a run-time check finds them apart or the same
// VECTORIZE: {{.*}}: remark: [vectorize] prelude: rewritten: rewritten; inserted the ktx device helpers (namespace ktx) after the includes
// VECTORIZE: +// ktx: `vectorize` instantiated with VEC_L0=1, VEC_L2=4
// VECTORIZE: +
// VECTORIZE: +// ktx:prelude -- device helpers for code rewritten by ktx passes (vectorize, cache-hints).
// VECTORIZE: +namespace ktx {
// VECTORIZE: +
// VECTORIZE: +// The unsigned type one access of BYTES bytes moves.
// VECTORIZE: +template <int BYTES> struct word;
// VECTORIZE: +template <> struct word<1> { using type = unsigned char; };
// VECTORIZE: +template <> struct word<2> { using type = unsigned short; };
// VECTORIZE: +template <> struct word<4> { using type = unsigned int; };
// VECTORIZE: +template <> struct word<8> { using type = uint2; };
// VECTORIZE: +template <> struct word<16> { using type = uint4; };
// VECTORIZE: +
// VECTORIZE: +// N elements of T, aligned to their total size so that one instruction moves them.
// VECTORIZE: +template <typename T, int N>
// VECTORIZE: +struct alignas(sizeof(T) * N) pack {
// VECTORIZE: +  T v[N];
// VECTORIZE: +};
// VECTORIZE: +
// VECTORIZE: +// Whether p can be accessed N elements at a time (aligned to N * sizeof(T) bytes).
// VECTORIZE: +template <int N, typename T>
// VECTORIZE: +__device__ __forceinline__ bool aligned(const T* p) {
// VECTORIZE: +  return reinterpret_cast<unsigned long long>(p) % (sizeof(T) * N) == 0;
// VECTORIZE: +}
// VECTORIZE: +
// VECTORIZE: +// Elements from p to the next boundary of N elements (0 where p is on one, or is not even
// VECTORIZE: +// aligned to its element), at most n: the scalar head of a peeled packed loop.
// VECTORIZE: +template <int N, typename T, typename I>
// VECTORIZE: +__device__ __forceinline__ I head(const T* p, I n) {
// VECTORIZE: +  const unsigned long long a = reinterpret_cast<unsigned long long>(p);
// VECTORIZE: +  if (a % sizeof(T) != 0) return I(0);
// VECTORIZE: +  const I h = static_cast<I>((N - (a / sizeof(T)) % N) % N);
// VECTORIZE: +  return h < n ? h : (n > I(0) ? n : I(0));
// VECTORIZE: +}
// VECTORIZE: +
// VECTORIZE: +// Whether n elements from p and n from q share no byte (where the same array through both would
// VECTORIZE: +// break a pack: the body writes through one and then reads or writes through the other).
// VECTORIZE: +template <typename T, typename U>
// VECTORIZE: +__device__ __forceinline__ bool disjoint(const T* p, const U* q, long long n) {
// VECTORIZE: +  const unsigned long long a = reinterpret_cast<unsigned long long>(p);
// VECTORIZE: +  const unsigned long long b = reinterpret_cast<unsigned long long>(q);
// VECTORIZE: +  const unsigned long long m = n > 0 ? static_cast<unsigned long long>(n) : 0ULL;
// VECTORIZE: +  return a + m * sizeof(T) <= b || b + m * sizeof(U) <= a;
// VECTORIZE: +}
// VECTORIZE: +
// VECTORIZE: +// Whether n elements from p and n from q are the same elements or share no byte: where two
// VECTORIZE: +// pointers the kernel indexes alike may alias (no __restrict__), packs are taken only then.
// VECTORIZE: +template <typename T, typename U>
// VECTORIZE: +__device__ __forceinline__ bool apart(const T* p, const U* q, long long n) {
// VECTORIZE: +  const bool same = reinterpret_cast<const void*>(p) == reinterpret_cast<const void*>(q);
// VECTORIZE: +  return (same && sizeof(T) == sizeof(U)) || disjoint(p, q, n);
// VECTORIZE: +}
// VECTORIZE: +
// VECTORIZE: +// Read-only loads that are not kept in L1 (ld.global.nc.L1::no_allocate).
// VECTORIZE: +__device__ __forceinline__ unsigned char load_na(const unsigned char* p) {
// VECTORIZE: +  unsigned short r;
// VECTORIZE: +  asm("ld.global.nc.L1::no_allocate.u8 %0, [%1];" : "=h"(r) : "l"(p));
// VECTORIZE: +  return static_cast<unsigned char>(r);
// VECTORIZE: +}
// VECTORIZE: +__device__ __forceinline__ unsigned short load_na(const unsigned short* p) {
// VECTORIZE: +  unsigned short r;
// VECTORIZE: +  asm("ld.global.nc.L1::no_allocate.u16 %0, [%1];" : "=h"(r) : "l"(p));
// VECTORIZE: +  return r;
// VECTORIZE: +}
// VECTORIZE: +__device__ __forceinline__ unsigned int load_na(const unsigned int* p) {
// VECTORIZE: +  unsigned int r;
// VECTORIZE: +  asm("ld.global.nc.L1::no_allocate.u32 %0, [%1];" : "=r"(r) : "l"(p));
// VECTORIZE: +  return r;
// VECTORIZE: +}
// VECTORIZE: +__device__ __forceinline__ uint2 load_na(const uint2* p) {
// VECTORIZE: +  uint2 r;
// VECTORIZE: +  asm("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p));
// VECTORIZE: +  return r;
// VECTORIZE: +}
// VECTORIZE: +__device__ __forceinline__ uint4 load_na(const uint4* p) {
// VECTORIZE: +  uint4 r;
// VECTORIZE: +  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
// VECTORIZE: +      : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
// VECTORIZE: +      : "l"(p));
// VECTORIZE: +  return r;
// VECTORIZE: +}
// VECTORIZE: +
// VECTORIZE: +// Any other type of 1 to 16 bytes, through the word of its size.
// VECTORIZE: +template <typename W>
// VECTORIZE: +__device__ __forceinline__ W load_na(const W* p) {
// VECTORIZE: +  using U = typename word<sizeof(W)>::type;
// VECTORIZE: +  const U u = load_na(reinterpret_cast<const U*>(p));
// VECTORIZE: +  return *reinterpret_cast<const W*>(&u);
// VECTORIZE: +}
// VECTORIZE: +
// VECTORIZE: +// One word with a cache policy. Load HINT: 0 plain, 1 __ldg, 2 __ldcs, 3 nc without L1.
// VECTORIZE: +// Store HINT: 0 plain, 1 __stcs.
// VECTORIZE: +template <int HINT, typename W>
// VECTORIZE: +__device__ __forceinline__ W load_word(const W* p) {
// VECTORIZE: +  if constexpr (HINT == 1) {
// VECTORIZE: +    return __ldg(p);
// VECTORIZE: +  } else if constexpr (HINT == 2) {
// VECTORIZE: +    return __ldcs(p);
// VECTORIZE: +  } else if constexpr (HINT == 3) {
// VECTORIZE: +    return load_na(p);
// VECTORIZE: +  } else {
// VECTORIZE: +    return *p;
// VECTORIZE: +  }
// VECTORIZE: +}
// VECTORIZE: +template <int HINT, typename W>
// VECTORIZE: +__device__ __forceinline__ void store_word(W* p, const W& x) {
// VECTORIZE: +  if constexpr (HINT == 1) {
// VECTORIZE: +    __stcs(p, x);
// VECTORIZE: +  } else {
// VECTORIZE: +    *p = x;
// VECTORIZE: +  }
// VECTORIZE: +}
// VECTORIZE: +
// VECTORIZE: +// N elements from p (aligned<N>(p) must hold), and back.
// VECTORIZE: +template <int N, int HINT = 0, typename T>
// VECTORIZE: +__device__ __forceinline__ pack<T, N> load(const T* p) {
// VECTORIZE: +  using W = typename word<sizeof(T) * N>::type;
// VECTORIZE: +  pack<T, N> r;
// VECTORIZE: +  *reinterpret_cast<W*>(r.v) = load_word<HINT>(reinterpret_cast<const W*>(p));
// VECTORIZE: +  return r;
// VECTORIZE: +}
// VECTORIZE: +template <int HINT = 0, typename T, int N>
// VECTORIZE: +__device__ __forceinline__ void store(T* p, const pack<T, N>& x) {
// VECTORIZE: +  using W = typename word<sizeof(T) * N>::type;
// VECTORIZE: +  store_word<HINT>(reinterpret_cast<W*>(p), *reinterpret_cast<const W*>(x.v));
// VECTORIZE: +}
// VECTORIZE: +
// VECTORIZE: +// One element with a cache policy (scalar accesses that cache-hints rewrote).
// VECTORIZE: +template <int HINT, typename T>
// VECTORIZE: +__device__ __forceinline__ T ld(const T* p) {
// VECTORIZE: +  using W = typename word<sizeof(T)>::type;
// VECTORIZE: +  const W w = load_word<HINT>(reinterpret_cast<const W*>(p));
// VECTORIZE: +  return *reinterpret_cast<const T*>(&w);
// VECTORIZE: +}
// VECTORIZE: +template <int HINT, typename T, typename U>
// VECTORIZE: +__device__ __forceinline__ void st(T* p, U value) {  // by value: no ODR-use of a host constexpr
// VECTORIZE: +  using W = typename word<sizeof(T)>::type;
// VECTORIZE: +  const T x = value;  // the conversion `*p = value` would make
// VECTORIZE: +  store_word<HINT>(reinterpret_cast<W*>(p), *reinterpret_cast<const W*>(&x));
// VECTORIZE: +}
// VECTORIZE: +
// VECTORIZE: +}  // namespace ktx
// VECTORIZE: +
// VECTORIZE: +  // VEC_L2: packed accesses where every packed row is aligned (checked here); the
// VECTORIZE: +  // scalar loop after the packed one takes the elements past the last whole pack.
// VECTORIZE: +  const int ktx_packs_L2 = (ktx::apart(out + row * d, in + row * d, d) &&
// VECTORIZE: +                            ktx::aligned<4>(out + row * d) &&
// VECTORIZE: +                            ktx::aligned<4>(in + row * d)) ? d / 4 : 0;
// VECTORIZE: -  for (int i = threadIdx.x; i < d; i += blockDim.x) out[row * d + i] = in[row * d + i] * rsqrtf(acc / d + 1e-6f);
// VECTORIZE: +  for (int ktx_p = threadIdx.x; ktx_p < ktx_packs_L2; ktx_p += blockDim.x) {
// VECTORIZE: +    ktx::pack<float, 4> ktx_out;
// VECTORIZE: +    const auto ktx_in = ktx::load<4>(in + row * d + ktx_p * 4);
// VECTORIZE: +#pragma unroll
// VECTORIZE: +    for (int ktx_j = 0; ktx_j < 4; ++ktx_j) {
// VECTORIZE: +      ktx_out.v[ktx_j] = ktx_in.v[ktx_j] * rsqrtf(acc / d + 1e-6f);
// VECTORIZE: +    }
// VECTORIZE: +    ktx::store(out + row * d + ktx_p * 4, ktx_out);
// VECTORIZE: +  }
// VECTORIZE: +#pragma unroll 4
// VECTORIZE: +  for (int i = ktx_packs_L2 * 4 + threadIdx.x; i < d; i += blockDim.x) out[row * d + i] = in[row * d + i] * rsqrtf(acc / d + 1e-6f);
// WARP_REDUCE: {{.*}}: remark: [warp-reduce] row_scale: skipped: no loop halving a stride with __syncthreads() (a shared-memory tree reduction)
// WARP_REDUCE-NOT: {{[-+].*}}
