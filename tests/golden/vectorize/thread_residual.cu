// RUN: ktx apply --passes vectorize %s --knobs | filecheck %s --match-full-lines --check-prefix=KNOBS
// RUN: ktx apply --passes vectorize %s --config VEC_THREAD=4 --diff -q | filecheck %s --match-full-lines --check-prefix=CONFIG
// One element per thread with an early return and a 64-bit index (PyTorch's and vLLM's
// elementwise kernels write it this way), two inputs and one output, float: float4 packs.
// No __restrict__: every load precedes the store of the same element, so packing them is safe.
__global__ void residual_add(float* out, const float* inp1, const float* inp2, size_t n) {
  const size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= n) return;
  out[idx] = inp1[idx] + inp2[idx];
}

void launch_residual(float* out, const float* inp1, const float* inp2, size_t n) {
  dim3 grid((unsigned)((n + 255) / 256));
  residual_add<<<grid, 256>>>(out, inp1, inp2, n);
}

// KNOBS: {
// KNOBS:   "kernel": "residual_add",
// KNOBS:   "pipeline": "vectorize",
// KNOBS:   "knobs": [
// KNOBS:     {"name": "VEC_THREAD", "values": [1, 2, 4], "default": 1, "help": "consecutive elements each thread takes, packed (1: one per thread, as written; out: 4 B, inp1: 4 B, inp2: 4 B)", "pass": "vectorize", "site": "residual_add"}
// KNOBS:   ],
// KNOBS:   "constraints": [],
// KNOBS:   "launch": {"grid": ["ceil_div((n + 255) // 256, VEC_THREAD)"], "block": ["256"], "shared": "0"},
// KNOBS:   "name_expression": "residual_add",
// KNOBS:   "template_args": []
// KNOBS: }
// CONFIG: +
// CONFIG: +// ktx:prelude -- device helpers for code rewritten by ktx passes (vectorize, cache-hints).
// CONFIG: +namespace ktx {
// CONFIG: +
// CONFIG: +// The unsigned type one access of BYTES bytes moves.
// CONFIG: +template <int BYTES> struct word;
// CONFIG: +template <> struct word<1> { using type = unsigned char; };
// CONFIG: +template <> struct word<2> { using type = unsigned short; };
// CONFIG: +template <> struct word<4> { using type = unsigned int; };
// CONFIG: +template <> struct word<8> { using type = uint2; };
// CONFIG: +template <> struct word<16> { using type = uint4; };
// CONFIG: +
// CONFIG: +// N elements of T, aligned to their total size so that one instruction moves them.
// CONFIG: +template <typename T, int N>
// CONFIG: +struct alignas(sizeof(T) * N) pack {
// CONFIG: +  T v[N];
// CONFIG: +};
// CONFIG: +
// CONFIG: +// Whether p can be accessed N elements at a time (aligned to N * sizeof(T) bytes).
// CONFIG: +template <int N, typename T>
// CONFIG: +__device__ __forceinline__ bool aligned(const T* p) {
// CONFIG: +  return reinterpret_cast<unsigned long long>(p) % (sizeof(T) * N) == 0;
// CONFIG: +}
// CONFIG: +
// CONFIG: +// Read-only loads that are not kept in L1 (ld.global.nc.L1::no_allocate).
// CONFIG: +__device__ __forceinline__ unsigned char load_na(const unsigned char* p) {
// CONFIG: +  unsigned short r;
// CONFIG: +  asm("ld.global.nc.L1::no_allocate.u8 %0, [%1];" : "=h"(r) : "l"(p));
// CONFIG: +  return static_cast<unsigned char>(r);
// CONFIG: +}
// CONFIG: +__device__ __forceinline__ unsigned short load_na(const unsigned short* p) {
// CONFIG: +  unsigned short r;
// CONFIG: +  asm("ld.global.nc.L1::no_allocate.u16 %0, [%1];" : "=h"(r) : "l"(p));
// CONFIG: +  return r;
// CONFIG: +}
// CONFIG: +__device__ __forceinline__ unsigned int load_na(const unsigned int* p) {
// CONFIG: +  unsigned int r;
// CONFIG: +  asm("ld.global.nc.L1::no_allocate.u32 %0, [%1];" : "=r"(r) : "l"(p));
// CONFIG: +  return r;
// CONFIG: +}
// CONFIG: +__device__ __forceinline__ uint2 load_na(const uint2* p) {
// CONFIG: +  uint2 r;
// CONFIG: +  asm("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p));
// CONFIG: +  return r;
// CONFIG: +}
// CONFIG: +__device__ __forceinline__ uint4 load_na(const uint4* p) {
// CONFIG: +  uint4 r;
// CONFIG: +  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
// CONFIG: +      : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
// CONFIG: +      : "l"(p));
// CONFIG: +  return r;
// CONFIG: +}
// CONFIG: +
// CONFIG: +// Any other type of 1 to 16 bytes, through the word of its size.
// CONFIG: +template <typename W>
// CONFIG: +__device__ __forceinline__ W load_na(const W* p) {
// CONFIG: +  using U = typename word<sizeof(W)>::type;
// CONFIG: +  const U u = load_na(reinterpret_cast<const U*>(p));
// CONFIG: +  return *reinterpret_cast<const W*>(&u);
// CONFIG: +}
// CONFIG: +
// CONFIG: +// One word with a cache policy. Load HINT: 0 plain, 1 __ldg, 2 __ldcs, 3 nc without L1.
// CONFIG: +// Store HINT: 0 plain, 1 __stcs.
// CONFIG: +template <int HINT, typename W>
// CONFIG: +__device__ __forceinline__ W load_word(const W* p) {
// CONFIG: +  if constexpr (HINT == 1) {
// CONFIG: +    return __ldg(p);
// CONFIG: +  } else if constexpr (HINT == 2) {
// CONFIG: +    return __ldcs(p);
// CONFIG: +  } else if constexpr (HINT == 3) {
// CONFIG: +    return load_na(p);
// CONFIG: +  } else {
// CONFIG: +    return *p;
// CONFIG: +  }
// CONFIG: +}
// CONFIG: +template <int HINT, typename W>
// CONFIG: +__device__ __forceinline__ void store_word(W* p, const W& x) {
// CONFIG: +  if constexpr (HINT == 1) {
// CONFIG: +    __stcs(p, x);
// CONFIG: +  } else {
// CONFIG: +    *p = x;
// CONFIG: +  }
// CONFIG: +}
// CONFIG: +
// CONFIG: +// N elements from p (aligned<N>(p) must hold), and back.
// CONFIG: +template <int N, int HINT = 0, typename T>
// CONFIG: +__device__ __forceinline__ pack<T, N> load(const T* p) {
// CONFIG: +  using W = typename word<sizeof(T) * N>::type;
// CONFIG: +  pack<T, N> r;
// CONFIG: +  *reinterpret_cast<W*>(r.v) = load_word<HINT>(reinterpret_cast<const W*>(p));
// CONFIG: +  return r;
// CONFIG: +}
// CONFIG: +template <int HINT = 0, typename T, int N>
// CONFIG: +__device__ __forceinline__ void store(T* p, const pack<T, N>& x) {
// CONFIG: +  using W = typename word<sizeof(T) * N>::type;
// CONFIG: +  store_word<HINT>(reinterpret_cast<W*>(p), *reinterpret_cast<const W*>(x.v));
// CONFIG: +}
// CONFIG: +
// CONFIG: +// One element with a cache policy (scalar accesses that cache-hints rewrote).
// CONFIG: +template <int HINT, typename T>
// CONFIG: +__device__ __forceinline__ T ld(const T* p) {
// CONFIG: +  using W = typename word<sizeof(T)>::type;
// CONFIG: +  const W w = load_word<HINT>(reinterpret_cast<const W*>(p));
// CONFIG: +  return *reinterpret_cast<const T*>(&w);
// CONFIG: +}
// CONFIG: +template <int HINT, typename T, typename U>
// CONFIG: +__device__ __forceinline__ void st(T* p, U value) {  // by value: no ODR-use of a host constexpr
// CONFIG: +  using W = typename word<sizeof(T)>::type;
// CONFIG: +  const T x = value;  // the conversion `*p = value` would make
// CONFIG: +  store_word<HINT>(reinterpret_cast<W*>(p), *reinterpret_cast<const W*>(&x));
// CONFIG: +}
// CONFIG: +
// CONFIG: +}  // namespace ktx
// CONFIG: +
// CONFIG: +// ktx: `vectorize` instantiated with VEC_THREAD=4
// CONFIG: -  const size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
// CONFIG: -  if (idx >= n) return;
// CONFIG: -  out[idx] = inp1[idx] + inp2[idx];
// CONFIG: +  // VEC_THREAD: each thread takes VEC_THREAD consecutive elements, packed where
// CONFIG: +  // every packed pointer is aligned and the pack is in bounds (checked here), else
// CONFIG: +  // one by one.
// CONFIG: +  const size_t ktx_p = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
// CONFIG: +  if (ktx::aligned<4>(out) &&
// CONFIG: +      ktx::aligned<4>(inp1) &&
// CONFIG: +      ktx::aligned<4>(inp2) &&
// CONFIG: +      ktx_p * 4 + 4 <= n) {
// CONFIG: +    ktx::pack<float, 4> ktx_out;
// CONFIG: +    const auto ktx_inp1 = ktx::load<4>(inp1 + ktx_p * 4);
// CONFIG: +    const auto ktx_inp2 = ktx::load<4>(inp2 + ktx_p * 4);
// CONFIG: +#pragma unroll
// CONFIG: +    for (int ktx_j = 0; ktx_j < 4; ++ktx_j) {
// CONFIG: +      ktx_out.v[ktx_j] = ktx_inp1.v[ktx_j] + ktx_inp2.v[ktx_j];
// CONFIG: +    }
// CONFIG: +    ktx::store(out + ktx_p * 4, ktx_out);
// CONFIG: +  } else {
// CONFIG: +    for (int ktx_j = 0; ktx_j < 4; ++ktx_j) {
// CONFIG: +      const size_t idx = ktx_p * 4 + ktx_j;
// CONFIG: +      if (idx >= n) continue;
// CONFIG: +      out[idx] = inp1[idx] + inp2[idx];
// CONFIG: +    }
// CONFIG: +  }
// CONFIG: -  dim3 grid((unsigned)((n + 255) / 256));
// CONFIG: +  dim3 grid(((unsigned)((n + 255) / 256) + 3) / 4);
