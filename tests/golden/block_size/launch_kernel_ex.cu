// RUN: ktx apply --passes block-size %s --diff 2>&1 | filecheck %s --match-full-lines
// cudaLaunchKernelEx: the geometry is in the config's fields, the kernel's arguments follow.
__global__ void scale(float* y, const float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i];
}

void run_scale(float* y, const float* x, float a, int n, cudaStream_t s) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3((n + 255) / 256);
  config.blockDim = dim3(256);
  config.dynamicSmemBytes = 0;
  config.stream = s;
  cudaLaunchKernelEx(&config, scale, y, x, a, n);
}

// CHECK: {{.*}}: remark: [block-size] scale: rewritten: exposed BLOCK_X {0, 32, 64, 128, 256, 512, 1024}; the grid's rounding up by 256 follows the knob (line 14); launch mapping: 256 -> BLOCK_X in grid[0], block[0]
// CHECK: -__global__ void scale(float* y, const float* x, float a, int n) {
// CHECK: +// ktx:knobs begin
// CHECK: +// scale templated by `block-size`.
// CHECK: +// Each KTX_ macro is a knob; the defaults reproduce the original. Pick other values with
// CHECK: +// `ktx apply --config NAME=VALUE` (clean code) or -DKTX_NAME=VALUE.
// CHECK: +#ifndef KTX_BLOCK_X
// CHECK: +#define KTX_BLOCK_X 0  // block-size: threads per block along x (0: as the original, now 256)
// CHECK: +#endif
// CHECK: +#ifndef KTX_PICK  // the knob, or the original expression when the knob is 0
// CHECK: +#define KTX_PICK(knob, original) ((knob) ? (knob) : original)
// CHECK: +#endif
// CHECK: +// ktx:knobs end
// CHECK: +__global__ void __launch_bounds__(KTX_BLOCK_X) scale(float* y, const float* x, float a, int n) {
// CHECK: -  config.gridDim = dim3((n + 255) / 256);
// CHECK: -  config.blockDim = dim3(256);
// CHECK: +  config.gridDim = dim3((n + (KTX_PICK(KTX_BLOCK_X, (256)) - 1)) / KTX_PICK(KTX_BLOCK_X, (256)));
// CHECK: +  config.blockDim = dim3(KTX_PICK(KTX_BLOCK_X, (256)));
