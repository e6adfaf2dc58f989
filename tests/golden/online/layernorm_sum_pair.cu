// RUN: ktx apply --passes online %s --config ONLINE=2 --diff 2>&1 | filecheck %s --match-full-lines
// RUN: ktx apply --passes row-owner,online,vectorize %s --config ONLINE=2 THREADS_PER_ROW=32 VEC_N12=4 --diff 2>&1 | filecheck %s --match-full-lines --check-prefix=PACKED
// The layernorm pair of layernorm.cu under ONLINE=2: the first loop also sums the count, Σx and
// Σx² (in double) of what the variance loop reads; no value crosses iterations but by +=, so after
// row-owner vectorize packs the fused loop (VEC_N12: the warp-per-row branch's fused loop), and
// v = Σx² - m (2 Σx - n m) once m is divided. The three sums are reduced across the row's lanes
// by ktx_sum_pair_reduce beside row-owner's reduce of m.
__global__ void layernorm_rows(float* out, const float* inp, const float* weight, int N, int C) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) {
        const float* x = inp + i * C;
        float m = 0.0f;
        for (int j = 0; j < C; j++) {
            m += x[j];
        }
        m = m / C;
        float v = 0.0f;
        for (int j = 0; j < C; j++) {
            float xshift = x[j] - m;
            v += xshift * xshift;
        }
        v = v / C;
        float s = 1.0f / sqrtf(v + 1e-5f);
        for (int j = 0; j < C; j++) {
            out[i * C + j] = s * (x[j] - m) * weight[j];
        }
    }
}

void layernorm(float* out, const float* inp, const float* weight, int N, int C) {
    layernorm_rows<<<(N + 255) / 256, 256>>>(out, inp, weight, N, C);
}

// CHECK: {{.*}}: remark: [online] layernorm_rows: rewritten: exposed ONLINE {0, 1, 2}; m (line 14) and the squared deviations v (line 20) in one pass (Welford)
// CHECK: +// ktx: `online` instantiated with ONLINE=2
// CHECK: +        float v = 0.0f;
// CHECK: +        // online (ONLINE=2): the count (int), sum and sum of squares of what v sums, in double
// CHECK: +        int ktx_v_n = 0;
// CHECK: +        double ktx_v_s1 = 0, ktx_v_s2 = 0;
// CHECK: +            // online: the element the sum of squares reads, into the sums
// CHECK: +            const double ktx_v_x = (double)(x[j]);  // not ktx_x: vectorize's pack of x
// CHECK: +            ktx_v_n += 1;
// CHECK: +            ktx_v_s1 += ktx_v_x;
// CHECK: +            ktx_v_s2 += ktx_v_x * ktx_v_x;
// CHECK: -        float v = 0.0f;
// CHECK: -        for (int j = 0; j < C; j++) {
// CHECK: -            float xshift = x[j] - m;
// CHECK: -            v += xshift * xshift;
// CHECK: -        }
// CHECK: +        // online: sum (x - c)^2 = Σx² - c (2 Σx - n c) in double, c = m as the second loop had it
// CHECK: +        v += (float)(ktx_v_s2 - (double)(m) * (2 * ktx_v_s1 - ktx_v_n * (double)(m)));
// PACKED: {{.*}}: remark: [row-owner] layernorm_rows: rewritten: exposed THREADS_PER_ROW {1, 32, 64, 128, 256, 512, 1024}, ROW_BLOCK {0, 128, 1024}; row index i (line 9); row loops at line 13, line 18, line 24; m is a sum over the row's lanes after the loop at line 13; v is a sum over the row's lanes after the loop at line 18
// PACKED: {{.*}}: remark: [online] layernorm_rows: rewritten: exposed ONLINE {0, 1, 2}; m (line 45) and the squared deviations v (line 52) in one pass (Welford); one triple reduction over KTX_THREADS_PER_ROW lanes; m (line 68) and the squared deviations v (line 75) in one pass (Welford); one triple reduction over 32 lanes; m (line 90) and the squared deviations v (line 96) in one pass (Welford)
// PACKED: {{.*}}: remark: [vectorize] N7: rewritten: exposed VEC_N7 {1, 2, 4}; packed 1 pointer(s): x
// PACKED: {{.*}}: remark: [vectorize] N8: skipped: the body assigns ktx_v_k, declared outside the loop, from one iteration to the next (line 156); only reductions (+=, fmaxf(...)) can be reordered
// PACKED: {{.*}}: remark: [vectorize] N9: rewritten: exposed VEC_N9 {1, 2, 4}; packed 1 pointer(s): x
// PACKED: {{.*}}: remark: [vectorize] N10: rewritten: exposed VEC_N10 {1, 2, 4}; packed 1 pointer(s): x
// PACKED: {{.*}}: remark: [vectorize] N11: rewritten: exposed VEC_N11 {1, 2, 4}; packed 3 pointer(s): out, weight, x; out and x may alias: packed only where a run-time check finds x[(0) .. (0) + (n)) apart from the out elements the loop writes; out and weight may alias: packed only where a run-time check finds weight[(0) .. (0) + (n)) apart from the out elements the loop writes
// PACKED: {{.*}}: remark: [vectorize] N12: rewritten: exposed VEC_N12 {1, 2, 4}; packed 1 pointer(s): x
// PACKED: {{.*}}: remark: [vectorize] N13: skipped: the body assigns ktx_v_k, declared outside the loop, from one iteration to the next (line 220); only reductions (+=, fmaxf(...)) can be reordered
// PACKED: {{.*}}: remark: [vectorize] N14: rewritten: exposed VEC_N14 {1, 2, 4}; packed 1 pointer(s): x
// PACKED: {{.*}}: remark: [vectorize] N15: rewritten: exposed VEC_N15 {1, 2, 4}; packed 1 pointer(s): x
// PACKED: {{.*}}: remark: [vectorize] N16: rewritten: exposed VEC_N16 {1, 2, 4}; packed 3 pointer(s): out, weight, x; out and x may alias: packed only where a run-time check finds x[(0) .. (0) + (n)) apart from the out elements the loop writes; out and weight may alias: packed only where a run-time check finds weight[(0) .. (0) + (n)) apart from the out elements the loop writes
// PACKED: {{.*}}: remark: [vectorize] N17: rewritten: exposed VEC_N17 {1, 2, 4}; packed 1 pointer(s): x
// PACKED: {{.*}}: remark: [vectorize] N18: skipped: the body assigns ktx_v_k, declared outside the loop, from one iteration to the next (line 281); only reductions (+=, fmaxf(...)) can be reordered
// PACKED: {{.*}}: remark: [vectorize] L0: rewritten: exposed VEC_L0 {1, 2, 4}; packed 1 pointer(s): x
// PACKED: {{.*}}: remark: [vectorize] L1: rewritten: exposed VEC_L1 {1, 2, 4}; packed 1 pointer(s): x
// PACKED: {{.*}}: remark: [vectorize] L2: rewritten: exposed VEC_L2 {1, 2, 4}; packed 3 pointer(s): out, weight, x; out and x may alias: packed only where a run-time check finds x[(0) .. (0) + (n)) apart from the out elements the loop writes; out and weight may alias: packed only where a run-time check finds weight[(0) .. (0) + (n)) apart from the out elements the loop writes
// PACKED: {{.*}}: remark: [vectorize] prelude: rewritten: rewritten; inserted the ktx device helpers (namespace ktx) after the includes
// PACKED: +// ktx: `row-owner,online,vectorize` instantiated with THREADS_PER_ROW=32, ROW_BLOCK=0, ONLINE=2, VEC_N7=1, VEC_N9=1, VEC_N10=1, VEC_N11=1, VEC_N12=4, VEC_N14=1, VEC_N15=1, VEC_N16=1, VEC_N17=1, VEC_L0=1, VEC_L1=1, VEC_L2=1
// PACKED: +
// PACKED: +// ktx:prelude -- device helpers for code rewritten by ktx passes (vectorize, cache-hints).
// PACKED: +namespace ktx {
// PACKED: +
// PACKED: +// The unsigned type one access of BYTES bytes moves.
// PACKED: +template <int BYTES> struct word;
// PACKED: +template <> struct word<1> { using type = unsigned char; };
// PACKED: +template <> struct word<2> { using type = unsigned short; };
// PACKED: +template <> struct word<4> { using type = unsigned int; };
// PACKED: +template <> struct word<8> { using type = uint2; };
// PACKED: +template <> struct word<16> { using type = uint4; };
// PACKED: +
// PACKED: +// N elements of T, aligned to their total size so that one instruction moves them.
// PACKED: +template <typename T, int N>
// PACKED: +struct alignas(sizeof(T) * N) pack {
// PACKED: +  T v[N];
// PACKED: +};
// PACKED: +
// PACKED: +// Whether p can be accessed N elements at a time (aligned to N * sizeof(T) bytes).
// PACKED: +template <int N, typename T>
// PACKED: +__device__ __forceinline__ bool aligned(const T* p) {
// PACKED: +  return reinterpret_cast<unsigned long long>(p) % (sizeof(T) * N) == 0;
// PACKED: +}
// PACKED: +
// PACKED: +// Elements from p to the next boundary of N elements (0 where p is on one, or is not even
// PACKED: +// aligned to its element), at most n: the scalar head of a peeled packed loop.
// PACKED: +template <int N, typename T, typename I>
// PACKED: +__device__ __forceinline__ I head(const T* p, I n) {
// PACKED: +  const unsigned long long a = reinterpret_cast<unsigned long long>(p);
// PACKED: +  if (a % sizeof(T) != 0) return I(0);
// PACKED: +  const I h = static_cast<I>((N - (a / sizeof(T)) % N) % N);
// PACKED: +  return h < n ? h : (n > I(0) ? n : I(0));
// PACKED: +}
// PACKED: +
// PACKED: +// Whether n elements from p and n from q share no byte (where the same array through both would
// PACKED: +// break a pack: the body writes through one and then reads or writes through the other).
// PACKED: +template <typename T, typename U>
// PACKED: +__device__ __forceinline__ bool disjoint(const T* p, const U* q, long long n) {
// PACKED: +  const unsigned long long a = reinterpret_cast<unsigned long long>(p);
// PACKED: +  const unsigned long long b = reinterpret_cast<unsigned long long>(q);
// PACKED: +  const unsigned long long m = n > 0 ? static_cast<unsigned long long>(n) : 0ULL;
// PACKED: +  return a + m * sizeof(T) <= b || b + m * sizeof(U) <= a;
// PACKED: +}
// PACKED: +
// PACKED: +// Whether n elements from p and n from q are the same elements or share no byte: where two
// PACKED: +// pointers the kernel indexes alike may alias (no __restrict__), packs are taken only then.
// PACKED: +template <typename T, typename U>
// PACKED: +__device__ __forceinline__ bool apart(const T* p, const U* q, long long n) {
// PACKED: +  const bool same = reinterpret_cast<const void*>(p) == reinterpret_cast<const void*>(q);
// PACKED: +  return (same && sizeof(T) == sizeof(U)) || disjoint(p, q, n);
// PACKED: +}
// PACKED: +
// PACKED: +// Read-only loads that are not kept in L1 (ld.global.nc.L1::no_allocate).
// PACKED: +__device__ __forceinline__ unsigned char load_na(const unsigned char* p) {
// PACKED: +  unsigned short r;
// PACKED: +  asm("ld.global.nc.L1::no_allocate.u8 %0, [%1];" : "=h"(r) : "l"(p));
// PACKED: +  return static_cast<unsigned char>(r);
// PACKED: +}
// PACKED: +__device__ __forceinline__ unsigned short load_na(const unsigned short* p) {
// PACKED: +  unsigned short r;
// PACKED: +  asm("ld.global.nc.L1::no_allocate.u16 %0, [%1];" : "=h"(r) : "l"(p));
// PACKED: +  return r;
// PACKED: +}
// PACKED: +__device__ __forceinline__ unsigned int load_na(const unsigned int* p) {
// PACKED: +  unsigned int r;
// PACKED: +  asm("ld.global.nc.L1::no_allocate.u32 %0, [%1];" : "=r"(r) : "l"(p));
// PACKED: +  return r;
// PACKED: +}
// PACKED: +__device__ __forceinline__ uint2 load_na(const uint2* p) {
// PACKED: +  uint2 r;
// PACKED: +  asm("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p));
// PACKED: +  return r;
// PACKED: +}
// PACKED: +__device__ __forceinline__ uint4 load_na(const uint4* p) {
// PACKED: +  uint4 r;
// PACKED: +  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
// PACKED: +      : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
// PACKED: +      : "l"(p));
// PACKED: +  return r;
// PACKED: +}
// PACKED: +
// PACKED: +// Any other type of 1 to 16 bytes, through the word of its size.
// PACKED: +template <typename W>
// PACKED: +__device__ __forceinline__ W load_na(const W* p) {
// PACKED: +  using U = typename word<sizeof(W)>::type;
// PACKED: +  const U u = load_na(reinterpret_cast<const U*>(p));
// PACKED: +  return *reinterpret_cast<const W*>(&u);
// PACKED: +}
// PACKED: +
// PACKED: +// One word with a cache policy. Load HINT: 0 plain, 1 __ldg, 2 __ldcs, 3 nc without L1.
// PACKED: +// Store HINT: 0 plain, 1 __stcs.
// PACKED: +template <int HINT, typename W>
// PACKED: +__device__ __forceinline__ W load_word(const W* p) {
// PACKED: +  if constexpr (HINT == 1) {
// PACKED: +    return __ldg(p);
// PACKED: +  } else if constexpr (HINT == 2) {
// PACKED: +    return __ldcs(p);
// PACKED: +  } else if constexpr (HINT == 3) {
// PACKED: +    return load_na(p);
// PACKED: +  } else {
// PACKED: +    return *p;
// PACKED: +  }
// PACKED: +}
// PACKED: +template <int HINT, typename W>
// PACKED: +__device__ __forceinline__ void store_word(W* p, const W& x) {
// PACKED: +  if constexpr (HINT == 1) {
// PACKED: +    __stcs(p, x);
// PACKED: +  } else {
// PACKED: +    *p = x;
// PACKED: +  }
// PACKED: +}
// PACKED: +
// PACKED: +// N elements from p (aligned<N>(p) must hold), and back.
// PACKED: +template <int N, int HINT = 0, typename T>
// PACKED: +__device__ __forceinline__ pack<T, N> load(const T* p) {
// PACKED: +  using W = typename word<sizeof(T) * N>::type;
// PACKED: +  pack<T, N> r;
// PACKED: +  *reinterpret_cast<W*>(r.v) = load_word<HINT>(reinterpret_cast<const W*>(p));
// PACKED: +  return r;
// PACKED: +}
// PACKED: +template <int HINT = 0, typename T, int N>
// PACKED: +__device__ __forceinline__ void store(T* p, const pack<T, N>& x) {
// PACKED: +  using W = typename word<sizeof(T) * N>::type;
// PACKED: +  store_word<HINT>(reinterpret_cast<W*>(p), *reinterpret_cast<const W*>(x.v));
// PACKED: +}
// PACKED: +
// PACKED: +// One element with a cache policy (scalar accesses that cache-hints rewrote).
// PACKED: +template <int HINT, typename T>
// PACKED: +__device__ __forceinline__ T ld(const T* p) {
// PACKED: +  using W = typename word<sizeof(T)>::type;
// PACKED: +  const W w = load_word<HINT>(reinterpret_cast<const W*>(p));
// PACKED: +  return *reinterpret_cast<const T*>(&w);
// PACKED: +}
// PACKED: +template <int HINT, typename T, typename U>
// PACKED: +__device__ __forceinline__ void st(T* p, U value) {  // by value: no ODR-use of a host constexpr
// PACKED: +  using W = typename word<sizeof(T)>::type;
// PACKED: +  const T x = value;  // the conversion `*p = value` would make
// PACKED: +  store_word<HINT>(reinterpret_cast<W*>(p), *reinterpret_cast<const W*>(&x));
// PACKED: +}
// PACKED: +
// PACKED: +}  // namespace ktx
// PACKED: +
// PACKED: +// row-owner: reduce a per-lane value over the T threads that own a row (all lanes get it)
// PACKED: +struct ktx_row_sum {
// PACKED: +  template <typename V> __device__ V operator()(V a, V b) const { return a + b; }
// PACKED: +};
// PACKED: +struct ktx_row_max {
// PACKED: +  template <typename V> __device__ V operator()(V a, V b) const { return max(a, b); }
// PACKED: +};
// PACKED: +struct ktx_row_min {
// PACKED: +  template <typename V> __device__ V operator()(V a, V b) const { return min(a, b); }
// PACKED: +};
// PACKED: +template <int T, typename V, typename Op>
// PACKED: +__device__ __forceinline__ V ktx_row_reduce(V v, Op op) {
// PACKED: +  constexpr int W = T < 32 ? T : 32;
// PACKED: +  const unsigned group = threadIdx.x & 31u & ~(unsigned)(W - 1);  // the group's first lane
// PACKED: +  const unsigned mask = W == 32 ? 0xffffffffu : ((1u << W) - 1u) << group;
// PACKED: +#pragma unroll
// PACKED: +  for (int o = W / 2; o > 0; o /= 2) v = op(v, __shfl_xor_sync(mask, v, o));
// PACKED: +  __syncwarp(mask);  // the row's lanes see each other's writes before the loops after the reduction
// PACKED: +  if (T > 32) {
// PACKED: +    __shared__ V part[32];
// PACKED: +    __syncthreads();
// PACKED: +    if ((threadIdx.x & 31u) == 0) part[threadIdx.x / 32] = v;
// PACKED: +    __syncthreads();
// PACKED: +    v = part[0];
// PACKED: +    for (int w = 1; w < T / 32; ++w) v = op(v, part[w]);
// PACKED: +  }
// PACKED: +  return v;
// PACKED: +}
// PACKED: +#ifndef KTX_WELFORD_REDUCE
// PACKED: +#define KTX_WELFORD_REDUCE
// PACKED: +// online: merge two Welford quadruples (count, shift, mean and squared deviations of x - shift),
// PACKED: +// Chan et al. 1979; each side's mean is kept relative to its shift (its first element), so a row
// PACKED: +// whose mean is far larger than its spread loses no digits to the running mean's rounding
// PACKED: +template <typename V>
// PACKED: +__device__ __forceinline__ void ktx_welford_combine(V& n, V& k, V& mean, V& m2, V on, V ok, V omean, V om2) {
// PACKED: +  k = n > V(0) ? k : ok;
// PACKED: +  const V tn = n + on;
// PACKED: +  const V w = tn > V(0) ? on / tn : V(0);
// PACKED: +  const V d = (ok - k) + (omean - mean);
// PACKED: +  mean += d * w;
// PACKED: +  m2 += om2 + d * d * n * w;
// PACKED: +  n = tn;
// PACKED: +}
// PACKED: +// online: reduce the quadruple over the T threads that own a row (all lanes get it)
// PACKED: +template <int T, typename V>
// PACKED: +__device__ __forceinline__ void ktx_welford_reduce(V& n, V& k, V& mean, V& m2) {
// PACKED: +  constexpr int W = T < 32 ? T : 32;
// PACKED: +  const unsigned group = threadIdx.x & 31u & ~(unsigned)(W - 1);
// PACKED: +  const unsigned mask = W == 32 ? 0xffffffffu : ((1u << W) - 1u) << group;
// PACKED: +#pragma unroll
// PACKED: +  for (int o = W / 2; o > 0; o /= 2) {
// PACKED: +    const V on = __shfl_xor_sync(mask, n, o);
// PACKED: +    const V ok = __shfl_xor_sync(mask, k, o);
// PACKED: +    const V omean = __shfl_xor_sync(mask, mean, o);
// PACKED: +    const V om2 = __shfl_xor_sync(mask, m2, o);
// PACKED: +    ktx_welford_combine(n, k, mean, m2, on, ok, omean, om2);
// PACKED: +  }
// PACKED: +  __syncwarp(mask);
// PACKED: +  if (T > 32) {
// PACKED: +    __shared__ V pn[32], pk[32], pmean[32], pm2[32];
// PACKED: +    __syncthreads();
// PACKED: +    if ((threadIdx.x & 31u) == 0) {
// PACKED: +      pn[threadIdx.x / 32] = n;
// PACKED: +      pk[threadIdx.x / 32] = k;
// PACKED: +      pmean[threadIdx.x / 32] = mean;
// PACKED: +      pm2[threadIdx.x / 32] = m2;
// PACKED: +    }
// PACKED: +    __syncthreads();
// PACKED: +    n = pn[0];
// PACKED: +    k = pk[0];
// PACKED: +    mean = pmean[0];
// PACKED: +    m2 = pm2[0];
// PACKED: +    for (int w = 1; w < T / 32; ++w) ktx_welford_combine(n, k, mean, m2, pn[w], pk[w], pmean[w], pm2[w]);
// PACKED: +  }
// PACKED: +}
// PACKED: +#endif
// PACKED: +#ifndef KTX_SUM_PAIR_REDUCE
// PACKED: +#define KTX_SUM_PAIR_REDUCE
// PACKED: +// online (ONLINE=2): sum the count, the sum and the sum of squares over the T threads that own a
// PACKED: +// row (all lanes get them); plain sums, so one butterfly and one shared-memory pass for all three
// PACKED: +template <int T, typename N, typename V>
// PACKED: +__device__ __forceinline__ void ktx_sum_pair_reduce(N& n, V& s1, V& s2) {
// PACKED: +  constexpr int W = T < 32 ? T : 32;
// PACKED: +  const unsigned group = threadIdx.x & 31u & ~(unsigned)(W - 1);
// PACKED: +  const unsigned mask = W == 32 ? 0xffffffffu : ((1u << W) - 1u) << group;
// PACKED: +#pragma unroll
// PACKED: +  for (int o = W / 2; o > 0; o /= 2) {
// PACKED: +    n += __shfl_xor_sync(mask, n, o);
// PACKED: +    s1 += __shfl_xor_sync(mask, s1, o);
// PACKED: +    s2 += __shfl_xor_sync(mask, s2, o);
// PACKED: +  }
// PACKED: +  __syncwarp(mask);
// PACKED: +  if (T > 32) {
// PACKED: +    __shared__ N pn[32];
// PACKED: +    __shared__ V p1[32], p2[32];
// PACKED: +    __syncthreads();
// PACKED: +    if ((threadIdx.x & 31u) == 0) {
// PACKED: +      pn[threadIdx.x / 32] = n;
// PACKED: +      p1[threadIdx.x / 32] = s1;
// PACKED: +      p2[threadIdx.x / 32] = s2;
// PACKED: +    }
// PACKED: +    __syncthreads();
// PACKED: +    n = pn[0];
// PACKED: +    s1 = p1[0];
// PACKED: +    s2 = p2[0];
// PACKED: +    for (int w = 1; w < T / 32; ++w) {
// PACKED: +      n += pn[w];
// PACKED: +      s1 += p1[w];
// PACKED: +      s2 += p2[w];
// PACKED: +    }
// PACKED: +  }
// PACKED: +}
// PACKED: +#endif
// PACKED: -    int i = blockIdx.x * blockDim.x + threadIdx.x;
// PACKED: +    const int ktx_lane = threadIdx.x % 32;
// PACKED: +    int i = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
// PACKED: -        for (int j = 0; j < C; j++) {
// PACKED: -            m += x[j];
// PACKED: +        float v = 0.0f;
// PACKED: +        // online (ONLINE=2): the count (int), sum and sum of squares of what v sums, in double
// PACKED: +        int ktx_v_n = 0;
// PACKED: +        double ktx_v_s1 = 0, ktx_v_s2 = 0;
// PACKED: +        {
// PACKED: +          // VEC_N12: packed accesses where every packed row is aligned (checked here); the
// PACKED: +          // scalar loop after the packed one takes the elements past the last whole pack.
// PACKED: +          const int ktx_packs_N12 = (ktx::aligned<4>(x)) ? C / 4 : 0;
// PACKED: +          for (int ktx_p = ktx_lane; ktx_p < ktx_packs_N12; ktx_p += 32) {
// PACKED: +            const auto ktx_x = ktx::load<4>(x + ktx_p * 4);
// PACKED: +#pragma unroll
// PACKED: +            for (int ktx_j = 0; ktx_j < 4; ++ktx_j) {
// PACKED: +              m += ktx_x.v[ktx_j];
// PACKED: +              // online: the element the sum of squares reads, into the sums
// PACKED: +              const double ktx_v_x = (double)(ktx_x.v[ktx_j]);
// PACKED: +              // not ktx_x: vectorize's pack of x
// PACKED: +              ktx_v_n += 1;
// PACKED: +              ktx_v_s1 += ktx_v_x;
// PACKED: +              ktx_v_s2 += ktx_v_x * ktx_v_x;
// PACKED: +            }
// PACKED: +          }
// PACKED: +          for (int j = ktx_packs_N12 * 4 + ktx_lane; j < C; j += 32) {
// PACKED: +              m += x[j];
// PACKED: +              // online: the element the sum of squares reads, into the sums
// PACKED: +              const double ktx_v_x = (double)(x[j]);  // not ktx_x: vectorize's pack of x
// PACKED: +              ktx_v_n += 1;
// PACKED: +              ktx_v_s1 += ktx_v_x;
// PACKED: +              ktx_v_s2 += ktx_v_x * ktx_v_x;
// PACKED: +          }
// PACKED: +        ktx_sum_pair_reduce<32>(ktx_v_n, ktx_v_s1, ktx_v_s2);
// PACKED: +        m = ktx_row_reduce<32>(m, ktx_row_sum());
// PACKED: -        float v = 0.0f;
// PACKED: -        for (int j = 0; j < C; j++) {
// PACKED: -            float xshift = x[j] - m;
// PACKED: -            v += xshift * xshift;
// PACKED: -        }
// PACKED: +        // online: sum (x - c)^2 = Σx² - c (2 Σx - n c) in double, c = m as the second loop had it
// PACKED: +        v += (float)(ktx_v_s2 - (double)(m) * (2 * ktx_v_s1 - ktx_v_n * (double)(m)));
// PACKED: -        for (int j = 0; j < C; j++) {
// PACKED: +        for (int j = ktx_lane; j < C; j += 32) {
// PACKED: -    layernorm_rows<<<(N + 255) / 256, 256>>>(out, inp, weight, N, C);
// PACKED: +    layernorm_rows<<<((N + 255) / 256) * 32, 256>>>(out, inp, weight, N, C);
