// RUN: ktx apply --passes vectorize %s --diff 2>&1 | filecheck %s --match-full-lines
// RUN: ktx apply --passes vectorize %s --config VEC_THREAD=8 --diff -q | filecheck %s --match-full-lines --check-prefix=CONFIG
// One element per thread, the shape of llm.c's gelu_forward_kernel1: a bf16 element type behind
// a typedef, locals (xi, cube) inside the guarded body. Each thread takes VEC_THREAD consecutive
// elements: 16-byte packs for 8 x bf16 where both pointers are aligned and the pack is in
// bounds, the elements one by one otherwise; the grid's x is divided by VEC_THREAD.
#include <cuda_bf16.h>
typedef __nv_bfloat16 floatX;
#define GELU_SCALING_FACTOR sqrtf(2.0f / 3.14159265f)

__global__ void gelu_forward(floatX* out, const floatX* inp, int N) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) {
        float xi = inp[i];
        float cube = 0.044715f * xi * xi * xi;
        out[i] = 0.5f * xi * (1.0f + tanhf(GELU_SCALING_FACTOR * (xi + cube)));
    }
}

void launch_gelu(floatX* out, const floatX* inp, int N, int block_size) {
    const int grid_size = (N + block_size - 1) / block_size;
    gelu_forward<<<grid_size, block_size>>>(out, inp, N);
}

// CHECK: {{.*}}: remark: [vectorize] gelu_forward: rewritten: exposed VEC_THREAD {1, 2, 4, 8}; i: packed 2 pointer(s): inp, out; grid x divided by VEC_THREAD; floatX is __nv_bfloat16 (2 B); ktx_p * VEC_THREAD is int, as i was: it wraps when N is within VEC_THREAD * blockDim.x of the type's limit
// CHECK: {{.*}}: remark: [vectorize] prelude: rewritten: rewritten; inserted the ktx device helpers (namespace ktx) after the includes
// CHECK: +
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
// CHECK: +// gelu_forward templated by `vectorize`.
// CHECK: +// Each KTX_ macro is a knob; the defaults reproduce the original. Pick other values with
// CHECK: +// `ktx apply --config NAME=VALUE` (clean code) or -DKTX_NAME=VALUE.
// CHECK: +#ifndef KTX_VEC_THREAD
// CHECK: +#define KTX_VEC_THREAD 1  // vectorize: consecutive elements each thread takes, packed (1: one per thread, as written; inp: 2 B, out: 2 B)
// CHECK: +#endif
// CHECK: +#ifndef KTX_CDIV
// CHECK: +#define KTX_CDIV(a, b) (((a) + (b) - 1) / (b))
// CHECK: +#endif
// CHECK: +// ktx:knobs end
// CHECK: +#if KTX_VEC_THREAD > 1
// CHECK: +    // VEC_THREAD: each thread takes VEC_THREAD consecutive elements, packed where
// CHECK: +    // every packed pointer is aligned and the pack is in bounds (checked here), else
// CHECK: +    // one by one.
// CHECK: +    const int ktx_p = blockIdx.x * blockDim.x + threadIdx.x;
// CHECK: +    if (ktx::aligned<KTX_VEC_THREAD>(inp) &&
// CHECK: +        ktx::aligned<KTX_VEC_THREAD>(out) &&
// CHECK: +        ktx_p * KTX_VEC_THREAD + KTX_VEC_THREAD <= N) {
// CHECK: +        const auto ktx_inp = ktx::load<KTX_VEC_THREAD>(inp + ktx_p * KTX_VEC_THREAD);
// CHECK: +        ktx::pack<floatX, KTX_VEC_THREAD> ktx_out;
// CHECK: +#pragma unroll
// CHECK: +        for (int ktx_j = 0; ktx_j < KTX_VEC_THREAD; ++ktx_j) {
// CHECK: +            float xi = ktx_inp.v[ktx_j];
// CHECK: +            float cube = 0.044715f * xi * xi * xi;
// CHECK: +            ktx_out.v[ktx_j] = 0.5f * xi * (1.0f + tanhf(GELU_SCALING_FACTOR * (xi + cube)));
// CHECK: +        }
// CHECK: +        ktx::store(out + ktx_p * KTX_VEC_THREAD, ktx_out);
// CHECK: +    } else {
// CHECK: +        for (int ktx_j = 0; ktx_j < KTX_VEC_THREAD; ++ktx_j) {
// CHECK: +            const int i = ktx_p * KTX_VEC_THREAD + ktx_j;
// CHECK: +            if (i < N) {
// CHECK: +                float xi = inp[i];
// CHECK: +                float cube = 0.044715f * xi * xi * xi;
// CHECK: +                out[i] = 0.5f * xi * (1.0f + tanhf(GELU_SCALING_FACTOR * (xi + cube)));
// CHECK: +            }
// CHECK: +        }
// CHECK: +    }
// CHECK: +#else
// CHECK: +#endif
// CHECK: -    gelu_forward<<<grid_size, block_size>>>(out, inp, N);
// CHECK: +    gelu_forward<<<KTX_CDIV(grid_size, KTX_VEC_THREAD), block_size>>>(out, inp, N);
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
// CONFIG: +// ktx: `vectorize` instantiated with VEC_THREAD=8
// CONFIG: -    int i = blockIdx.x * blockDim.x + threadIdx.x;
// CONFIG: -    if (i < N) {
// CONFIG: -        float xi = inp[i];
// CONFIG: -        float cube = 0.044715f * xi * xi * xi;
// CONFIG: -        out[i] = 0.5f * xi * (1.0f + tanhf(GELU_SCALING_FACTOR * (xi + cube)));
// CONFIG: +    // VEC_THREAD: each thread takes VEC_THREAD consecutive elements, packed where
// CONFIG: +    // every packed pointer is aligned and the pack is in bounds (checked here), else
// CONFIG: +    // one by one.
// CONFIG: +    const int ktx_p = blockIdx.x * blockDim.x + threadIdx.x;
// CONFIG: +    if (ktx::aligned<8>(inp) &&
// CONFIG: +        ktx::aligned<8>(out) &&
// CONFIG: +        ktx_p * 8 + 8 <= N) {
// CONFIG: +        const auto ktx_inp = ktx::load<8>(inp + ktx_p * 8);
// CONFIG: +        ktx::pack<floatX, 8> ktx_out;
// CONFIG: +#pragma unroll
// CONFIG: +        for (int ktx_j = 0; ktx_j < 8; ++ktx_j) {
// CONFIG: +            float xi = ktx_inp.v[ktx_j];
// CONFIG: +            float cube = 0.044715f * xi * xi * xi;
// CONFIG: +            ktx_out.v[ktx_j] = 0.5f * xi * (1.0f + tanhf(GELU_SCALING_FACTOR * (xi + cube)));
// CONFIG: +        }
// CONFIG: +        ktx::store(out + ktx_p * 8, ktx_out);
// CONFIG: +    } else {
// CONFIG: +        for (int ktx_j = 0; ktx_j < 8; ++ktx_j) {
// CONFIG: +            const int i = ktx_p * 8 + ktx_j;
// CONFIG: +            if (i < N) {
// CONFIG: +                float xi = inp[i];
// CONFIG: +                float cube = 0.044715f * xi * xi * xi;
// CONFIG: +                out[i] = 0.5f * xi * (1.0f + tanhf(GELU_SCALING_FACTOR * (xi + cube)));
// CONFIG: +            }
// CONFIG: +        }
// CONFIG: -    gelu_forward<<<grid_size, block_size>>>(out, inp, N);
// CONFIG: +    gelu_forward<<<(grid_size + 7) / 8, block_size>>>(out, inp, N);
