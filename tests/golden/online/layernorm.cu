// RUN: ktx apply --passes online %s --config ONLINE=1 --diff 2>&1 | filecheck %s --match-full-lines
// RUN: ktx apply --passes row-owner,online %s --config ONLINE=1 THREADS_PER_ROW=32 --diff 2>&1 | filecheck %s --match-full-lines --check-prefix=WARP
// llm.c's layernorm_forward v1 shape, written anew: one thread per row, the mean, then the sum of
// squared deviations from it, then the write. online keeps the first loop as written (the sum m
// keeps its value) and adds Welford's count, mean and M2 of what the variance loop reads, so the
// variance loop goes: v = M2 + n (mean - m)^2 once m is divided. After row-owner the triple is
// reduced across the row's lanes in one reduction beside row-owner's reduce of m.
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
// CHECK: +// ktx: `online` instantiated with ONLINE=1
// CHECK: +        float v = 0.0f;
// CHECK: +        // online: Welford's count, shift (the first element), mean and squared deviations of
// CHECK: +        // x - shift, for what v sums
// CHECK: +        float ktx_v_n = 0, ktx_v_k = 0, ktx_v_mean = 0, ktx_v_m2 = 0;
// CHECK: +            // online: the element the sum of squares reads, folded into the quadruple
// CHECK: +            const float ktx_x = x[j];
// CHECK: +            ktx_v_k = ktx_v_n > 0 ? ktx_v_k : ktx_x;
// CHECK: +            const float ktx_y = ktx_x - ktx_v_k;
// CHECK: +            ktx_v_n += 1;
// CHECK: +            const float ktx_d = ktx_y - ktx_v_mean;
// CHECK: +            ktx_v_mean += ktx_d / ktx_v_n;
// CHECK: +            ktx_v_m2 += ktx_d * (ktx_y - ktx_v_mean);
// CHECK: -        float v = 0.0f;
// CHECK: -        for (int j = 0; j < C; j++) {
// CHECK: -            float xshift = x[j] - m;
// CHECK: -            v += xshift * xshift;
// CHECK: -        }
// CHECK: +        // online: sum (x - c)^2 = M2 + n (mean - c)^2, c = m as the second loop had it
// CHECK: +        v += ktx_v_m2 + ktx_v_n * ((ktx_v_k - m) + ktx_v_mean) * ((ktx_v_k - m) + ktx_v_mean);
// WARP: {{.*}}: remark: [row-owner] layernorm_rows: rewritten: exposed THREADS_PER_ROW {1, 32, 64, 128, 256, 512, 1024}, ROW_BLOCK {0, 128, 1024}; row index i (line 9); row loops at line 13, line 18, line 24; m is a sum over the row's lanes after the loop at line 13; v is a sum over the row's lanes after the loop at line 18
// WARP: {{.*}}: remark: [online] layernorm_rows: rewritten: exposed ONLINE {0, 1, 2}; m (line 45) and the squared deviations v (line 52) in one pass (Welford); one triple reduction over KTX_THREADS_PER_ROW lanes; m (line 68) and the squared deviations v (line 75) in one pass (Welford); one triple reduction over 32 lanes; m (line 90) and the squared deviations v (line 96) in one pass (Welford)
// WARP: +// ktx: `row-owner,online` instantiated with THREADS_PER_ROW=32, ROW_BLOCK=0, ONLINE=1
// WARP: +// row-owner: reduce a per-lane value over the T threads that own a row (all lanes get it)
// WARP: +struct ktx_row_sum {
// WARP: +  template <typename V> __device__ V operator()(V a, V b) const { return a + b; }
// WARP: +};
// WARP: +struct ktx_row_max {
// WARP: +  template <typename V> __device__ V operator()(V a, V b) const { return max(a, b); }
// WARP: +};
// WARP: +struct ktx_row_min {
// WARP: +  template <typename V> __device__ V operator()(V a, V b) const { return min(a, b); }
// WARP: +};
// WARP: +template <int T, typename V, typename Op>
// WARP: +__device__ __forceinline__ V ktx_row_reduce(V v, Op op) {
// WARP: +  constexpr int W = T < 32 ? T : 32;
// WARP: +  const unsigned group = threadIdx.x & 31u & ~(unsigned)(W - 1);  // the group's first lane
// WARP: +  const unsigned mask = W == 32 ? 0xffffffffu : ((1u << W) - 1u) << group;
// WARP: +#pragma unroll
// WARP: +  for (int o = W / 2; o > 0; o /= 2) v = op(v, __shfl_xor_sync(mask, v, o));
// WARP: +  __syncwarp(mask);  // the row's lanes see each other's writes before the loops after the reduction
// WARP: +  if (T > 32) {
// WARP: +    __shared__ V part[32];
// WARP: +    __syncthreads();
// WARP: +    if ((threadIdx.x & 31u) == 0) part[threadIdx.x / 32] = v;
// WARP: +    __syncthreads();
// WARP: +    v = part[0];
// WARP: +    for (int w = 1; w < T / 32; ++w) v = op(v, part[w]);
// WARP: +  }
// WARP: +  return v;
// WARP: +}
// WARP: +#ifndef KTX_WELFORD_REDUCE
// WARP: +#define KTX_WELFORD_REDUCE
// WARP: +// online: merge two Welford quadruples (count, shift, mean and squared deviations of x - shift),
// WARP: +// Chan et al. 1979; each side's mean is kept relative to its shift (its first element), so a row
// WARP: +// whose mean is far larger than its spread loses no digits to the running mean's rounding
// WARP: +template <typename V>
// WARP: +__device__ __forceinline__ void ktx_welford_combine(V& n, V& k, V& mean, V& m2, V on, V ok, V omean, V om2) {
// WARP: +  k = n > V(0) ? k : ok;
// WARP: +  const V tn = n + on;
// WARP: +  const V w = tn > V(0) ? on / tn : V(0);
// WARP: +  const V d = (ok - k) + (omean - mean);
// WARP: +  mean += d * w;
// WARP: +  m2 += om2 + d * d * n * w;
// WARP: +  n = tn;
// WARP: +}
// WARP: +// online: reduce the quadruple over the T threads that own a row (all lanes get it)
// WARP: +template <int T, typename V>
// WARP: +__device__ __forceinline__ void ktx_welford_reduce(V& n, V& k, V& mean, V& m2) {
// WARP: +  constexpr int W = T < 32 ? T : 32;
// WARP: +  const unsigned group = threadIdx.x & 31u & ~(unsigned)(W - 1);
// WARP: +  const unsigned mask = W == 32 ? 0xffffffffu : ((1u << W) - 1u) << group;
// WARP: +#pragma unroll
// WARP: +  for (int o = W / 2; o > 0; o /= 2) {
// WARP: +    const V on = __shfl_xor_sync(mask, n, o);
// WARP: +    const V ok = __shfl_xor_sync(mask, k, o);
// WARP: +    const V omean = __shfl_xor_sync(mask, mean, o);
// WARP: +    const V om2 = __shfl_xor_sync(mask, m2, o);
// WARP: +    ktx_welford_combine(n, k, mean, m2, on, ok, omean, om2);
// WARP: +  }
// WARP: +  __syncwarp(mask);
// WARP: +  if (T > 32) {
// WARP: +    __shared__ V pn[32], pk[32], pmean[32], pm2[32];
// WARP: +    __syncthreads();
// WARP: +    if ((threadIdx.x & 31u) == 0) {
// WARP: +      pn[threadIdx.x / 32] = n;
// WARP: +      pk[threadIdx.x / 32] = k;
// WARP: +      pmean[threadIdx.x / 32] = mean;
// WARP: +      pm2[threadIdx.x / 32] = m2;
// WARP: +    }
// WARP: +    __syncthreads();
// WARP: +    n = pn[0];
// WARP: +    k = pk[0];
// WARP: +    mean = pmean[0];
// WARP: +    m2 = pm2[0];
// WARP: +    for (int w = 1; w < T / 32; ++w) ktx_welford_combine(n, k, mean, m2, pn[w], pk[w], pmean[w], pm2[w]);
// WARP: +  }
// WARP: +}
// WARP: +#endif
// WARP: +#ifndef KTX_SUM_PAIR_REDUCE
// WARP: +#define KTX_SUM_PAIR_REDUCE
// WARP: +// online (ONLINE=2): sum the count, the sum and the sum of squares over the T threads that own a
// WARP: +// row (all lanes get them); plain sums, so one butterfly and one shared-memory pass for all three
// WARP: +template <int T, typename N, typename V>
// WARP: +__device__ __forceinline__ void ktx_sum_pair_reduce(N& n, V& s1, V& s2) {
// WARP: +  constexpr int W = T < 32 ? T : 32;
// WARP: +  const unsigned group = threadIdx.x & 31u & ~(unsigned)(W - 1);
// WARP: +  const unsigned mask = W == 32 ? 0xffffffffu : ((1u << W) - 1u) << group;
// WARP: +#pragma unroll
// WARP: +  for (int o = W / 2; o > 0; o /= 2) {
// WARP: +    n += __shfl_xor_sync(mask, n, o);
// WARP: +    s1 += __shfl_xor_sync(mask, s1, o);
// WARP: +    s2 += __shfl_xor_sync(mask, s2, o);
// WARP: +  }
// WARP: +  __syncwarp(mask);
// WARP: +  if (T > 32) {
// WARP: +    __shared__ N pn[32];
// WARP: +    __shared__ V p1[32], p2[32];
// WARP: +    __syncthreads();
// WARP: +    if ((threadIdx.x & 31u) == 0) {
// WARP: +      pn[threadIdx.x / 32] = n;
// WARP: +      p1[threadIdx.x / 32] = s1;
// WARP: +      p2[threadIdx.x / 32] = s2;
// WARP: +    }
// WARP: +    __syncthreads();
// WARP: +    n = pn[0];
// WARP: +    s1 = p1[0];
// WARP: +    s2 = p2[0];
// WARP: +    for (int w = 1; w < T / 32; ++w) {
// WARP: +      n += pn[w];
// WARP: +      s1 += p1[w];
// WARP: +      s2 += p2[w];
// WARP: +    }
// WARP: +  }
// WARP: +}
// WARP: +#endif
// WARP: -    int i = blockIdx.x * blockDim.x + threadIdx.x;
// WARP: +    const int ktx_lane = threadIdx.x % 32;
// WARP: +    int i = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
// WARP: -        for (int j = 0; j < C; j++) {
// WARP: +        float v = 0.0f;
// WARP: +        // online: Welford's count, shift (the first element), mean and squared deviations of
// WARP: +        // x - shift, for what v sums
// WARP: +        float ktx_v_n = 0, ktx_v_k = 0, ktx_v_mean = 0, ktx_v_m2 = 0;
// WARP: +        for (int j = ktx_lane; j < C; j += 32) {
// WARP: +            // online: the element the sum of squares reads, folded into the quadruple
// WARP: +            const float ktx_x = x[j];
// WARP: +            ktx_v_k = ktx_v_n > 0 ? ktx_v_k : ktx_x;
// WARP: +            const float ktx_y = ktx_x - ktx_v_k;
// WARP: +            ktx_v_n += 1;
// WARP: +            const float ktx_d = ktx_y - ktx_v_mean;
// WARP: +            ktx_v_mean += ktx_d / ktx_v_n;
// WARP: +            ktx_v_m2 += ktx_d * (ktx_y - ktx_v_mean);
// WARP: +        ktx_welford_reduce<32>(ktx_v_n, ktx_v_k, ktx_v_mean, ktx_v_m2);
// WARP: +        m = ktx_row_reduce<32>(m, ktx_row_sum());
// WARP: -        float v = 0.0f;
// WARP: -        for (int j = 0; j < C; j++) {
// WARP: -            float xshift = x[j] - m;
// WARP: -            v += xshift * xshift;
// WARP: -        }
// WARP: +        // online: sum (x - c)^2 = M2 + n (mean - c)^2, c = m as the second loop had it
// WARP: +        v += ktx_v_m2 + ktx_v_n * ((ktx_v_k - m) + ktx_v_mean) * ((ktx_v_k - m) + ktx_v_mean);
// WARP: -        for (int j = 0; j < C; j++) {
// WARP: +        for (int j = ktx_lane; j < C; j += 32) {
// WARP: -    layernorm_rows<<<(N + 255) / 256, 256>>>(out, inp, weight, N, C);
// WARP: +    layernorm_rows<<<((N + 255) / 256) * 32, 256>>>(out, inp, weight, N, C);
