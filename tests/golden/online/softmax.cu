// RUN: ktx apply --passes online %s --config ONLINE=1 --diff 2>&1 | filecheck %s --match-full-lines
// RUN: ktx apply --passes row-owner,online %s --config ONLINE=1 THREADS_PER_ROW=32 --diff 2>&1 | filecheck %s --match-full-lines --check-prefix=WARP
// llm.c's softmax_forward v1 shape, written anew: one thread per row, three passes. The sum
// reads the max through the element stored in the same iteration (out_row[j]); online fuses the
// max and the sum into one pass of running pairs, and the stores join the in-place loop after.
// After row-owner, its two cross-lane reductions become one reduction of (max, sum) pairs.
__global__ void softmax_rows(float* out, const float* inp, int N, int C) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) {
        const float* inp_row = inp + i * C;
        float* out_row = out + i * C;
        float maxval = -INFINITY;
        for (int j = 0; j < C; j++) {
            if (inp_row[j] > maxval) {
                maxval = inp_row[j];
            }
        }
        double sum = 0.0;
        for (int j = 0; j < C; j++) {
            out_row[j] = expf(inp_row[j] - maxval);
            sum += out_row[j];
        }
        for (int j = 0; j < C; j++) {
            out_row[j] /= (float)sum;
        }
    }
}

void softmax(float* out, const float* inp, int N, int C) {
    softmax_rows<<<(N + 255) / 256, 256>>>(out, inp, N, C);
}

// CHECK: {{.*}}: remark: [online] softmax_rows: rewritten: exposed ONLINE {0, 1}; maxval (line 15) and sum (line 21) in one pass; the loop at line 23 joins the stores
// CHECK: +// ktx: `online` instantiated with ONLINE=1
// CHECK: -        for (int j = 0; j < C; j++) {
// CHECK: -            if (inp_row[j] > maxval) {
// CHECK: -                maxval = inp_row[j];
// CHECK: -            }
// CHECK: -        }
// CHECK: -            out_row[j] = expf(inp_row[j] - maxval);
// CHECK: -            sum += out_row[j];
// CHECK: +            // online: the running max and the sum of expf(x - max) rescaled to it, in one pass
// CHECK: +            const float ktx_x = inp_row[j];
// CHECK: +            const float ktx_d = ktx_x == maxval ? float(0) : ktx_x - maxval;  // -inf - -inf: 0, not NaN
// CHECK: +            const bool ktx_up = ktx_d > 0;
// CHECK: +            const float ktx_e = expf(ktx_up ? -ktx_d : ktx_d);
// CHECK: +            sum = ktx_up ? sum * ktx_e + 1 : sum + ktx_e;
// CHECK: +            maxval = ktx_up ? ktx_x : maxval;
// CHECK: +            out_row[j] = expf(inp_row[j] - maxval);
// WARP: {{.*}}: remark: [row-owner] softmax_rows: rewritten: exposed THREADS_PER_ROW {1, 32, 64, 128, 256, 512, 1024}, ROW_BLOCK {0, 128, 1024}; row index i (line 8); row loops at line 13, line 19, line 23; maxval is a max over the row's lanes after the loop at line 13; sum is a sum over the row's lanes after the loop at line 19
// WARP: {{.*}}: remark: [online] softmax_rows: rewritten: exposed ONLINE {0, 1}; maxval (line 46) and sum (line 53) in one pass; the loop at line 56 joins the stores; one pair reduction over KTX_THREADS_PER_ROW lanes; maxval (line 69) and sum (line 76) in one pass; the loop at line 79 joins the stores; one pair reduction over 32 lanes; maxval (line 91) and sum (line 97) in one pass; the loop at line 99 joins the stores
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
// WARP: +#ifndef KTX_ONLINE_REDUCE
// WARP: +#define KTX_ONLINE_REDUCE
// WARP: +// online: combine two (max, sum of exp(x - max)) pairs; a side at -inf adds nothing
// WARP: +template <typename M, typename S>
// WARP: +__device__ __forceinline__ void ktx_online_combine(M& m, S& s, M om, S os) {
// WARP: +  const M nm = m > om ? m : om;
// WARP: +  s = (m == nm ? s : s * exp(m - nm)) + (om == nm ? os : os * exp(om - nm));
// WARP: +  m = nm;
// WARP: +}
// WARP: +// online: reduce the pair over the T threads that own a row (all lanes get it)
// WARP: +template <int T, typename M, typename S>
// WARP: +__device__ __forceinline__ void ktx_online_reduce(M& m, S& s) {
// WARP: +  constexpr int W = T < 32 ? T : 32;
// WARP: +  const unsigned group = threadIdx.x & 31u & ~(unsigned)(W - 1);
// WARP: +  const unsigned mask = W == 32 ? 0xffffffffu : ((1u << W) - 1u) << group;
// WARP: +#pragma unroll
// WARP: +  for (int o = W / 2; o > 0; o /= 2) {
// WARP: +    const M om = __shfl_xor_sync(mask, m, o);
// WARP: +    const S os = __shfl_xor_sync(mask, s, o);
// WARP: +    ktx_online_combine(m, s, om, os);
// WARP: +  }
// WARP: +  __syncwarp(mask);
// WARP: +  if (T > 32) {
// WARP: +    __shared__ M pm[32];
// WARP: +    __shared__ S ps[32];
// WARP: +    __syncthreads();
// WARP: +    if ((threadIdx.x & 31u) == 0) {
// WARP: +      pm[threadIdx.x / 32] = m;
// WARP: +      ps[threadIdx.x / 32] = s;
// WARP: +    }
// WARP: +    __syncthreads();
// WARP: +    m = pm[0];
// WARP: +    s = ps[0];
// WARP: +    for (int w = 1; w < T / 32; ++w) ktx_online_combine(m, s, pm[w], ps[w]);
// WARP: +  }
// WARP: +}
// WARP: +#endif
// WARP: -    int i = blockIdx.x * blockDim.x + threadIdx.x;
// WARP: +    const int ktx_lane = threadIdx.x % 32;
// WARP: +    int i = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
// WARP: -        for (int j = 0; j < C; j++) {
// WARP: -            if (inp_row[j] > maxval) {
// WARP: -                maxval = inp_row[j];
// WARP: -            }
// WARP: +        double sum = 0.0;
// WARP: +        for (int j = ktx_lane; j < C; j += 32) {
// WARP: +            // online: the running max and the sum of expf(x - max) rescaled to it, in one pass
// WARP: +            const float ktx_x = inp_row[j];
// WARP: +            const float ktx_d = ktx_x == maxval ? float(0) : ktx_x - maxval;  // -inf - -inf: 0, not NaN
// WARP: +            const bool ktx_up = ktx_d > 0;
// WARP: +            const float ktx_e = expf(ktx_up ? -ktx_d : ktx_d);
// WARP: +            sum = ktx_up ? sum * ktx_e + 1 : sum + ktx_e;
// WARP: +            maxval = ktx_up ? ktx_x : maxval;
// WARP: -        double sum = 0.0;
// WARP: -        for (int j = 0; j < C; j++) {
// WARP: +        ktx_online_reduce<32>(maxval, sum);
// WARP: +        for (int j = ktx_lane; j < C; j += 32) {
// WARP: -            sum += out_row[j];
// WARP: -        }
// WARP: -        for (int j = 0; j < C; j++) {
// WARP: -    softmax_rows<<<(N + 255) / 256, 256>>>(out, inp, N, C);
// WARP: +    softmax_rows<<<((N + 255) / 256) * 32, 256>>>(out, inp, N, C);
// RUN: ktx apply --passes row-owner,online %s --config ONLINE=1 THREADS_PER_ROW=256 --diff -q 2>&1 | filecheck %s --match-full-lines --check-prefix=BLOCK
// A block per row (T > 32): the fused loop steps by the group's size, a compile-time constant
// nvcc unrolls (four loads in flight); the write loop keeps blockDim.x, the form vectorize reads.
// BLOCK: +        for (int j = threadIdx.x; j < C; j += (256 > 32 ? 256 : (int)blockDim.x)) {
// BLOCK: +        ktx_online_reduce<256>(maxval, sum);
// BLOCK: +        for (int j = threadIdx.x; j < C; j += blockDim.x) {
