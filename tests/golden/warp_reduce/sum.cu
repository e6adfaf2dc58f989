// RUN: ktx apply --passes warp-reduce %s --diff 2>&1 | filecheck %s --match-full-lines
// RUN: ktx apply --passes warp-reduce %s --config WARP_REDUCE_L1=1 --diff -q | filecheck %s --match-full-lines --check-prefix=CONFIG
// The textbook shared-memory tree: log2(256) barriers become two.
#define BLOCK 256
__global__ void row_sum(float* __restrict__ out, const float* __restrict__ x, int n) {
  __shared__ float sdata[BLOCK];
  const unsigned tid = threadIdx.x;
  float acc = 0.f;
  for (int i = tid; i < n; i += blockDim.x) acc += x[blockIdx.x * n + i];
  sdata[tid] = acc;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (tid < s) {
      sdata[tid] += sdata[tid + s];
    }
    __syncthreads();
  }
  if (tid == 0) out[blockIdx.x] = sdata[0];
}

void launch_row_sum(float* out, const float* x, int rows, int n) { row_sum<<<rows, BLOCK>>>(out, x, n); }

// CHECK: {{.*}}: remark: [warp-reduce] L1: rewritten: exposed WARP_REDUCE_L1 {0, 1}; sum of blockDim.x float values in sdata; needs blocks of whole warps
// CHECK: +// ktx:knobs begin
// CHECK: +// row_sum templated by `warp-reduce`.
// CHECK: +// Each KTX_ macro is a knob; the defaults reproduce the original. Pick other values with
// CHECK: +// `ktx apply --config NAME=VALUE` (clean code) or -DKTX_NAME=VALUE.
// CHECK: +#ifndef KTX_WARP_REDUCE_L1
// CHECK: +#define KTX_WARP_REDUCE_L1 0  // warp-reduce: loop L1: 0 shared-memory tree, 1 warp shuffles
// CHECK: +#endif
// CHECK: +// ktx:knobs end
// CHECK: +#if KTX_WARP_REDUCE_L1
// CHECK: +  {  // WARP_REDUCE_L1: shuffles inside each warp, one step through sdata across warps
// CHECK: +    const unsigned ktx_lane = threadIdx.x % 32, ktx_warp = threadIdx.x / 32;
// CHECK: +    float ktx_v = sdata[threadIdx.x];
// CHECK: +#pragma unroll
// CHECK: +    for (int ktx_o = 16; ktx_o > 0; ktx_o /= 2) ktx_v = ktx_v + __shfl_down_sync(0xffffffffu, ktx_v, ktx_o);
// CHECK: +    if (ktx_lane == 0) sdata[ktx_warp * 32] = ktx_v;  // only this thread read that element
// CHECK: +    __syncthreads();
// CHECK: +    if (ktx_warp == 0) {
// CHECK: +      ktx_v = ktx_lane * 32 < blockDim.x ? sdata[ktx_lane * 32] : float(0);
// CHECK: +#pragma unroll
// CHECK: +      for (int ktx_o = 16; ktx_o > 0; ktx_o /= 2) ktx_v = ktx_v + __shfl_down_sync(0xffffffffu, ktx_v, ktx_o);
// CHECK: +      if (ktx_lane == 0) sdata[0] = ktx_v;
// CHECK: +    }
// CHECK: +    __syncthreads();
// CHECK: +  }
// CHECK: +#else
// CHECK: +#endif
// CONFIG: +// ktx: `warp-reduce` instantiated with WARP_REDUCE_L1=1
// CONFIG: -  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
// CONFIG: -    if (tid < s) {
// CONFIG: -      sdata[tid] += sdata[tid + s];
// CONFIG: +  {  // WARP_REDUCE_L1: shuffles inside each warp, one step through sdata across warps
// CONFIG: +    const unsigned ktx_lane = threadIdx.x % 32, ktx_warp = threadIdx.x / 32;
// CONFIG: +    float ktx_v = sdata[threadIdx.x];
// CONFIG: +#pragma unroll
// CONFIG: +    for (int ktx_o = 16; ktx_o > 0; ktx_o /= 2) ktx_v = ktx_v + __shfl_down_sync(0xffffffffu, ktx_v, ktx_o);
// CONFIG: +    if (ktx_lane == 0) sdata[ktx_warp * 32] = ktx_v;  // only this thread read that element
// CONFIG: +    __syncthreads();
// CONFIG: +    if (ktx_warp == 0) {
// CONFIG: +      ktx_v = ktx_lane * 32 < blockDim.x ? sdata[ktx_lane * 32] : float(0);
// CONFIG: +#pragma unroll
// CONFIG: +      for (int ktx_o = 16; ktx_o > 0; ktx_o /= 2) ktx_v = ktx_v + __shfl_down_sync(0xffffffffu, ktx_v, ktx_o);
// CONFIG: +      if (ktx_lane == 0) sdata[0] = ktx_v;
