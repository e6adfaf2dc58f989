// RUN: ktx apply --passes block-size %s --diff 2>&1 | filecheck %s --match-full-lines
// RUN: ktx apply --passes block-size %s --config BLOCK_X=512 --diff -q | filecheck %s --match-full-lines --check-prefix=CONFIG
// A shape-dependent 1-D block: the knob defaults to 0, "as the launcher computes it".
__global__ void relu(float* x, int n) {
  const long long row = blockIdx.x;
  for (int i = threadIdx.x; i < n; i += blockDim.x) x[row * n + i] = fmaxf(x[row * n + i], 0.f);
}

void launch_relu(float* x, int rows, int n) {
  dim3 grid(rows);
  dim3 block(std::min(n, 256));
  relu<<<grid, block>>>(x, n);
}

// CHECK: {{.*}}: remark: [block-size] relu: rewritten: exposed BLOCK_X {0, 32, 64, 128, 256, 512, 1024}
// CHECK: -__global__ void relu(float* x, int n) {
// CHECK: +// ktx:knobs begin
// CHECK: +// relu templated by `block-size`.
// CHECK: +// Each KTX_ macro is a knob; the defaults reproduce the original. Pick other values with
// CHECK: +// `ktx apply --config NAME=VALUE` (clean code) or -DKTX_NAME=VALUE.
// CHECK: +#ifndef KTX_BLOCK_X
// CHECK: +#define KTX_BLOCK_X 0  // block-size: threads per block along x (0: as the original, now shape-dependent)
// CHECK: +#endif
// CHECK: +#ifndef KTX_PICK  // the knob, or the original expression when the knob is 0
// CHECK: +#define KTX_PICK(knob, original) ((knob) ? (knob) : original)
// CHECK: +#endif
// CHECK: +// ktx:knobs end
// CHECK: +__global__ void __launch_bounds__(KTX_BLOCK_X) relu(float* x, int n) {
// CHECK: -  dim3 block(std::min(n, 256));
// CHECK: +  dim3 block(KTX_PICK(KTX_BLOCK_X, (std::min(n, 256))));
// CONFIG: -__global__ void relu(float* x, int n) {
// CONFIG: +// ktx: `block-size` instantiated with BLOCK_X=512
// CONFIG: +__global__ void __launch_bounds__(512) relu(float* x, int n) {
// CONFIG: -  dim3 block(std::min(n, 256));
// CONFIG: +  dim3 block(512);
