// RUN: ktx apply --passes launch-bounds %s --diff 2>&1 | filecheck %s --match-full-lines
// RUN: ktx apply --passes launch-bounds %s --config BLOCK_X=256 MIN_BLOCKS=4 --diff -q | filecheck %s --match-full-lines --check-prefix=CONFIG
// launch-bounds requires block-size, which the pipeline adds (see the remarks).
__global__ void axpy(float* y, const float* x, float a, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] += a * x[i];
}

void launch_axpy(float* y, const float* x, float a, int n) {
  constexpr int threads = 256;
  axpy<<<(n + threads - 1) / threads, threads>>>(y, x, a, n);
}

// CHECK: {{.*}}: remark: [block-size] axpy: rewritten: exposed BLOCK_X {0, 32, 64, 128, 256, 512, 1024}
// CHECK: {{.*}}: remark: [launch-bounds] axpy: rewritten: exposed MIN_BLOCKS {0, 1, 2, 3, 4, 6, 8}
// CHECK: -__global__ void axpy(float* y, const float* x, float a, int n) {
// CHECK: +// ktx:knobs begin
// CHECK: +// axpy templated by `block-size,launch-bounds`.
// CHECK: +// Each KTX_ macro is a knob; the defaults reproduce the original. Pick other values with
// CHECK: +// `ktx apply --config NAME=VALUE` (clean code) or -DKTX_NAME=VALUE.
// CHECK: +#ifndef KTX_BLOCK_X
// CHECK: +#define KTX_BLOCK_X 0  // block-size: threads per block along x (0: as the original, now 256)
// CHECK: +#endif
// CHECK: +#ifndef KTX_MIN_BLOCKS
// CHECK: +#define KTX_MIN_BLOCKS 0  // launch-bounds: minimum resident blocks per SM (0: no minimum)
// CHECK: +#endif
// CHECK: +#ifndef KTX_PICK  // the knob, or the original expression when the knob is 0
// CHECK: +#define KTX_PICK(knob, original) ((knob) ? (knob) : original)
// CHECK: +#endif
// CHECK: +// ktx:knobs end
// CHECK: +__global__ void __launch_bounds__(KTX_BLOCK_X, KTX_MIN_BLOCKS) axpy(float* y, const float* x, float a, int n) {
// CHECK: -  constexpr int threads = 256;
// CHECK: +  constexpr int threads = KTX_PICK(KTX_BLOCK_X, (256));
// CONFIG: -__global__ void axpy(float* y, const float* x, float a, int n) {
// CONFIG: +// ktx: `block-size,launch-bounds` instantiated with BLOCK_X=256, MIN_BLOCKS=4
// CONFIG: +__global__ void __launch_bounds__(256, 4) axpy(float* y, const float* x, float a, int n) {
