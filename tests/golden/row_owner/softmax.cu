// RUN: ktx apply --passes row-owner %s --config THREADS_PER_ROW=32 --diff 2>&1 | filecheck %s --match-full-lines
// Softmax over the vocabulary, one thread per row: a max (fmaxf), a sum of exponentials that
// also stores them, and a rescale in place. With a warp per row the max and the sum are
// reduced with shuffles; the output a lane writes in the second loop is the one it rescales
// in the third (every loop strides the row the same way), so no barrier is needed.
__global__ void row_softmax(float* out, const float* logits, int n_rows, int vocab) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < n_rows) {
    const float* in = logits + r * vocab;
    float* o = out + r * vocab;
    float mx = -INFINITY;
    for (int j = 0; j < vocab; j++) mx = fmaxf(mx, in[j]);
    float total = 0.f;
    for (int j = 0; j < vocab; j++) {
      float e = __expf(in[j] - mx);
      o[j] = e;
      total += e;
    }
    const float inv = 1.f / total;
    for (int j = 0; j < vocab; j++) o[j] *= inv;
  }
}

void softmax(float* out, const float* logits, int n_rows, int vocab) {
  row_softmax<<<(n_rows + 255) / 256, 256>>>(out, logits, n_rows, vocab);
}

// CHECK: {{.*}}: remark: [row-owner] row_softmax: rewritten: exposed THREADS_PER_ROW {1, 32, 64, 128, 256, 512, 1024}, ROW_BLOCK {0, 128, 1024}; row index r (line 7); row loops at line 12, line 14, line 20; mx is a max over the row's lanes after the loop at line 12; total is a sum over the row's lanes after the loop at line 14
// CHECK: +// ktx: `row-owner` instantiated with THREADS_PER_ROW=32, ROW_BLOCK=0
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
// CHECK: -  int r = blockIdx.x * blockDim.x + threadIdx.x;
// CHECK: +  const int ktx_lane = threadIdx.x % 32;
// CHECK: +  int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
// CHECK: -    for (int j = 0; j < vocab; j++) mx = fmaxf(mx, in[j]);
// CHECK: +    for (int j = ktx_lane; j < vocab; j += 32) mx = fmaxf(mx, in[j]);
// CHECK: +    mx = ktx_row_reduce<32>(mx, ktx_row_max());
// CHECK: -    for (int j = 0; j < vocab; j++) {
// CHECK: +    for (int j = ktx_lane; j < vocab; j += 32) {
// CHECK: +    total = ktx_row_reduce<32>(total, ktx_row_sum());
// CHECK: -    for (int j = 0; j < vocab; j++) o[j] *= inv;
// CHECK: +    for (int j = ktx_lane; j < vocab; j += 32) o[j] *= inv;
// CHECK: -  row_softmax<<<(n_rows + 255) / 256, 256>>>(out, logits, n_rows, vocab);
// CHECK: +  row_softmax<<<((n_rows + 255) / 256) * 32, 256>>>(out, logits, n_rows, vocab);
// RUN: ktx apply --passes row-owner %s --config THREADS_PER_ROW=32 ROW_BLOCK=1024 --diff -q | filecheck %s --match-full-lines --check-prefix=ROWS
// A warp per row in blocks of ROW_BLOCK threads (llm.c's online8 at 1024): the row index reads
// blockDim.x at run time, and the grid covers the original launch's rows, 32 of them a block.
// ROWS: +// ktx: `row-owner` instantiated with THREADS_PER_ROW=32, ROW_BLOCK=1024
// ROWS: +  int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
// ROWS: -  row_softmax<<<(n_rows + 255) / 256, 256>>>(out, logits, n_rows, vocab);
// ROWS: +  row_softmax<<<(((n_rows + 255) / 256) * (256) * 32 + 1024 - 1) / 1024, 1024>>>(out, logits, n_rows, vocab);
