// RUN: ktx apply --passes row-owner %s --diff 2>&1 | filecheck %s --match-full-lines
// RUN: ktx apply --passes row-owner %s --config THREADS_PER_ROW=128 --diff -q | filecheck %s --match-full-lines --check-prefix=BLOCK
// A first-draft layer norm: one thread per token walks its row three times (mean, variance,
// normalise) and writes the row's statistics. Each row goes to a warp (32) or to a block of
// THREADS_PER_ROW threads: lanes stride the loops, the two sums are reduced over the group
// and broadcast, the statistics are stored by lane 0, and the early-return guard stays uniform.
__global__ void layer_norm_rows(float* __restrict__ y, float* __restrict__ mu, float* __restrict__ inv_std,
                                const float* __restrict__ x, const float* __restrict__ gamma,
                                const float* __restrict__ beta, int rows, int cols, float eps) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  const float* xr = x + row * cols;
  float sum = 0.f;
  for (int c = 0; c < cols; ++c) sum += xr[c];
  const float mean = sum / cols;
  float sq = 0.f;
  for (int c = 0; c < cols; ++c) {
    const float d = xr[c] - mean;
    sq += d * d;
  }
  const float rstd = rsqrtf(sq / cols + eps);
  float* yr = y + row * cols;
  for (int c = 0; c < cols; ++c) yr[c] = (xr[c] - mean) * rstd * gamma[c] + beta[c];
  mu[row] = mean;
  inv_std[row] = rstd;
}

void layer_norm(float* y, float* mu, float* inv_std, const float* x, const float* gamma, const float* beta,
                int rows, int cols) {
  const int threads = 128;
  layer_norm_rows<<<(rows + threads - 1) / threads, threads>>>(y, mu, inv_std, x, gamma, beta, rows, cols, 1e-5f);
}

// CHECK: {{.*}}: remark: [row-owner] layer_norm_rows: rewritten: exposed THREADS_PER_ROW {1, 32, 64, 128, 256, 512, 1024}, ROW_BLOCK {0, 128, 1024}; row index row (line 10); row loops at line 14, line 17, line 23; sum is a sum over the row's lanes after the loop at line 14; sq is a sum over the row's lanes after the loop at line 17
// CHECK: +// ktx:knobs begin
// CHECK: +// layer_norm_rows templated by `row-owner`.
// CHECK: +// Each KTX_ macro is a knob; the defaults reproduce the original. Pick other values with
// CHECK: +// `ktx apply --config NAME=VALUE` (clean code) or -DKTX_NAME=VALUE.
// CHECK: +#ifndef KTX_THREADS_PER_ROW
// CHECK: +#define KTX_THREADS_PER_ROW 1  // row-owner: threads that own a row (1: one thread walks it, as written)
// CHECK: +#endif
// CHECK: +#ifndef KTX_ROW_BLOCK
// CHECK: +#define KTX_ROW_BLOCK 0  // row-owner: threads per block when a warp owns a row (0: the original block)
// CHECK: +#endif
// CHECK: +// ktx:knobs end
// CHECK: +#if KTX_THREADS_PER_ROW > 1
// CHECK: +// row-owner: reduce a per-lane value over the T threads that own a row (all lanes get it)
// CHECK: +struct ktx_row_sum {
// CHECK: +  template <typename V> __device__ V operator()(V a, V b) const { return a + b; }
// CHECK: +};
// CHECK: +struct ktx_row_max {
// CHECK: +  template <typename V> __device__ V operator()(V a, V b) const { return max(a, b); }
// CHECK: +};
// CHECK: +struct ktx_row_min {
// CHECK: +  template <typename V> __device__ V operator()(V a, V b) const { return min(a, b); }
// CHECK: +};
// CHECK: +template <int T, typename V, typename Op>
// CHECK: +__device__ __forceinline__ V ktx_row_reduce(V v, Op op) {
// CHECK: +  constexpr int W = T < 32 ? T : 32;
// CHECK: +  const unsigned group = threadIdx.x & 31u & ~(unsigned)(W - 1);  // the group's first lane
// CHECK: +  const unsigned mask = W == 32 ? 0xffffffffu : ((1u << W) - 1u) << group;
// CHECK: +#pragma unroll
// CHECK: +  for (int o = W / 2; o > 0; o /= 2) v = op(v, __shfl_xor_sync(mask, v, o));
// CHECK: +  if (T > 32) {
// CHECK: +    __shared__ V part[32];
// CHECK: +    __syncthreads();
// CHECK: +    if ((threadIdx.x & 31u) == 0) part[threadIdx.x / 32] = v;
// CHECK: +    __syncthreads();
// CHECK: +    v = part[0];
// CHECK: +    for (int w = 1; w < T / 32; ++w) v = op(v, part[w]);
// CHECK: +  }
// CHECK: +  return v;
// CHECK: +}
// CHECK: +#endif
// CHECK: +#if KTX_THREADS_PER_ROW > 32
// CHECK: +  const int row = blockIdx.x;
// CHECK: +  if (row >= rows) return;
// CHECK: +  const float* xr = x + row * cols;
// CHECK: +  float sum = 0.f;
// CHECK: +  for (int c = threadIdx.x; c < cols; c += blockDim.x) sum += xr[c];
// CHECK: +  sum = ktx_row_reduce<KTX_THREADS_PER_ROW>(sum, ktx_row_sum());
// CHECK: +  const float mean = sum / cols;
// CHECK: +  float sq = 0.f;
// CHECK: +  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
// CHECK: +    const float d = xr[c] - mean;
// CHECK: +    sq += d * d;
// CHECK: +  }
// CHECK: +  sq = ktx_row_reduce<KTX_THREADS_PER_ROW>(sq, ktx_row_sum());
// CHECK: +  const float rstd = rsqrtf(sq / cols + eps);
// CHECK: +  float* yr = y + row * cols;
// CHECK: +  for (int c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = (xr[c] - mean) * rstd * gamma[c] + beta[c];
// CHECK: +  if (threadIdx.x == 0) mu[row] = mean;
// CHECK: +  if (threadIdx.x == 0) inv_std[row] = rstd;
// CHECK: +#elif KTX_THREADS_PER_ROW == 32
// CHECK: +  const int ktx_lane = threadIdx.x % 32;
// CHECK: +  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
// CHECK: +  if (row >= rows) return;
// CHECK: +  const float* xr = x + row * cols;
// CHECK: +  float sum = 0.f;
// CHECK: +  for (int c = ktx_lane; c < cols; c += 32) sum += xr[c];
// CHECK: +  sum = ktx_row_reduce<32>(sum, ktx_row_sum());
// CHECK: +  const float mean = sum / cols;
// CHECK: +  float sq = 0.f;
// CHECK: +  for (int c = ktx_lane; c < cols; c += 32) {
// CHECK: +    const float d = xr[c] - mean;
// CHECK: +    sq += d * d;
// CHECK: +  }
// CHECK: +  sq = ktx_row_reduce<32>(sq, ktx_row_sum());
// CHECK: +  const float rstd = rsqrtf(sq / cols + eps);
// CHECK: +  float* yr = y + row * cols;
// CHECK: +  for (int c = ktx_lane; c < cols; c += 32) yr[c] = (xr[c] - mean) * rstd * gamma[c] + beta[c];
// CHECK: +  if (ktx_lane == 0) mu[row] = mean;
// CHECK: +  if (ktx_lane == 0) inv_std[row] = rstd;
// CHECK: +#else
// CHECK: +#endif
// CHECK: +#if KTX_THREADS_PER_ROW > 32
// CHECK: +  layer_norm_rows<<<((rows + threads - 1) / threads) * (threads), KTX_THREADS_PER_ROW>>>(y, mu, inv_std, x, gamma, beta, rows, cols, 1e-5f);
// CHECK: +#elif KTX_THREADS_PER_ROW == 32 && KTX_ROW_BLOCK > 0
// CHECK: +  layer_norm_rows<<<(((rows + threads - 1) / threads) * (threads) * 32 + KTX_ROW_BLOCK - 1) / KTX_ROW_BLOCK, KTX_ROW_BLOCK>>>(y, mu, inv_std, x, gamma, beta, rows, cols, 1e-5f);
// CHECK: +#elif KTX_THREADS_PER_ROW == 32
// CHECK: +  layer_norm_rows<<<((rows + threads - 1) / threads) * 32, threads>>>(y, mu, inv_std, x, gamma, beta, rows, cols, 1e-5f);
// CHECK: +#else
// CHECK: +#endif
// BLOCK: +// ktx: `row-owner` instantiated with THREADS_PER_ROW=128, ROW_BLOCK=0
// BLOCK: +// row-owner: reduce a per-lane value over the T threads that own a row (all lanes get it)
// BLOCK: +struct ktx_row_sum {
// BLOCK: +  template <typename V> __device__ V operator()(V a, V b) const { return a + b; }
// BLOCK: +};
// BLOCK: +struct ktx_row_max {
// BLOCK: +  template <typename V> __device__ V operator()(V a, V b) const { return max(a, b); }
// BLOCK: +};
// BLOCK: +struct ktx_row_min {
// BLOCK: +  template <typename V> __device__ V operator()(V a, V b) const { return min(a, b); }
// BLOCK: +};
// BLOCK: +template <int T, typename V, typename Op>
// BLOCK: +__device__ __forceinline__ V ktx_row_reduce(V v, Op op) {
// BLOCK: +  constexpr int W = T < 32 ? T : 32;
// BLOCK: +  const unsigned group = threadIdx.x & 31u & ~(unsigned)(W - 1);  // the group's first lane
// BLOCK: +  const unsigned mask = W == 32 ? 0xffffffffu : ((1u << W) - 1u) << group;
// BLOCK: +#pragma unroll
// BLOCK: +  for (int o = W / 2; o > 0; o /= 2) v = op(v, __shfl_xor_sync(mask, v, o));
// BLOCK: +  if (T > 32) {
// BLOCK: +    __shared__ V part[32];
// BLOCK: +    __syncthreads();
// BLOCK: +    if ((threadIdx.x & 31u) == 0) part[threadIdx.x / 32] = v;
// BLOCK: +    __syncthreads();
// BLOCK: +    v = part[0];
// BLOCK: +    for (int w = 1; w < T / 32; ++w) v = op(v, part[w]);
// BLOCK: +  }
// BLOCK: +  return v;
// BLOCK: +}
// BLOCK: -  const int row = blockIdx.x * blockDim.x + threadIdx.x;
// BLOCK: +  const int row = blockIdx.x;
// BLOCK: -  for (int c = 0; c < cols; ++c) sum += xr[c];
// BLOCK: +  for (int c = threadIdx.x; c < cols; c += blockDim.x) sum += xr[c];
// BLOCK: +  sum = ktx_row_reduce<128>(sum, ktx_row_sum());
// BLOCK: -  for (int c = 0; c < cols; ++c) {
// BLOCK: +  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
// BLOCK: +  sq = ktx_row_reduce<128>(sq, ktx_row_sum());
// BLOCK: -  for (int c = 0; c < cols; ++c) yr[c] = (xr[c] - mean) * rstd * gamma[c] + beta[c];
// BLOCK: -  mu[row] = mean;
// BLOCK: -  inv_std[row] = rstd;
// BLOCK: +  for (int c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = (xr[c] - mean) * rstd * gamma[c] + beta[c];
// BLOCK: +  if (threadIdx.x == 0) mu[row] = mean;
// BLOCK: +  if (threadIdx.x == 0) inv_std[row] = rstd;
// BLOCK: -  layer_norm_rows<<<(rows + threads - 1) / threads, threads>>>(y, mu, inv_std, x, gamma, beta, rows, cols, 1e-5f);
// BLOCK: +  layer_norm_rows<<<((rows + threads - 1) / threads) * (threads), 128>>>(y, mu, inv_std, x, gamma, beta, rows, cols, 1e-5f);
