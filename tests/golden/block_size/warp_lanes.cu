// RUN: ktx apply --passes block-size %s --diff 2>&1 | filecheck %s --match-full-lines
// A 2-D block whose x is the warp the kernel shuffles over: only the warps per block (y) vary,
// and the shared memory sized from num_warps follows.
__global__ void row_sum(float* out, const float* in, int n) {
  extern __shared__ float partial[];
  float s = 0.f;
  for (int i = threadIdx.y * 32 + threadIdx.x; i < n; i += blockDim.x * blockDim.y) s += in[blockIdx.x * n + i];
  for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (threadIdx.x == 0) partial[threadIdx.y] = s;
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    float t = 0.f;
    for (int w = 0; w < blockDim.y; ++w) t += partial[w];
    out[blockIdx.x] = t;
  }
}

void launch_row_sum(float* out, const float* in, int rows, int n) {
  const int num_warps = std::max(1, std::min(32, n / 256));
  dim3 block(32, num_warps);
  const size_t smem = num_warps * sizeof(float);
  row_sum<<<rows, block, smem>>>(out, in, n);
}

// CHECK: {{.*}}: remark: [block-size] row_sum: rewritten: exposed BLOCK_Y {0, 1, 2, 4, 8, 16, 32}; x stays 32: the kernel shuffles across the lanes of a warp along x
// CHECK: -__global__ void row_sum(float* out, const float* in, int n) {
// CHECK: +// ktx:knobs begin
// CHECK: +// row_sum templated by `block-size`.
// CHECK: +// Each KTX_ macro is a knob; the defaults reproduce the original. Pick other values with
// CHECK: +// `ktx apply --config NAME=VALUE` (clean code) or -DKTX_NAME=VALUE.
// CHECK: +#ifndef KTX_BLOCK_Y
// CHECK: +#define KTX_BLOCK_Y 0  // block-size: threads per block along y (0: as the original, now shape-dependent)
// CHECK: +#endif
// CHECK: +#ifndef KTX_PICK  // the knob, or the original expression when the knob is 0
// CHECK: +#define KTX_PICK(knob, original) ((knob) ? (knob) : original)
// CHECK: +#endif
// CHECK: +// ktx:knobs end
// CHECK: +__global__ void __launch_bounds__(32 * KTX_BLOCK_Y) row_sum(float* out, const float* in, int n) {
// CHECK: -  const int num_warps = std::max(1, std::min(32, n / 256));
// CHECK: +  const int num_warps = KTX_PICK(KTX_BLOCK_Y, (std::max(1, std::min(32, n / 256))));
