// RUN: ktx apply --passes block-size %s --diff 2>&1 | filecheck %s --match-full-lines
// RUN: ktx apply --passes block-size %s --config BLOCK_X=256 --diff -q | filecheck %s --match-full-lines --check-prefix=CONFIG
// The user's own macros are named KTX_...: they are code, not knob placeholders. The template
// keeps them, and a config instantiates with them as written.
#define KTX_SCALE 2.0f
#define KTX_USE_CLAMP 1

__global__ void scale(float* x, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
#if KTX_USE_CLAMP
    x[i] = fminf(x[i] * KTX_SCALE, 1.f);
#else
    x[i] = x[i] * KTX_SCALE;
#endif
  }
}

void launch_scale(float* x, int n) {
  scale<<<(n + 127) / 128, dim3(std::min(n, 128))>>>(x, n);
}

// CHECK: {{.*}}: remark: [block-size] scale: rewritten: exposed BLOCK_X {0, 32, 64, 128, 256, 512, 1024}
// CHECK: +// ktx:knobs begin
// CHECK: +// scale templated by `block-size`.
// CHECK: +// Each KTX_ macro is a knob; the defaults reproduce the original. Pick other values with
// CHECK: +// `ktx apply --config NAME=VALUE` (clean code) or -DKTX_NAME=VALUE.
// CHECK: +#ifndef KTX_BLOCK_X
// CHECK: +#define KTX_BLOCK_X 0  // block-size: threads per block along x (0: as the original, now shape-dependent)
// CHECK: +#endif
// CHECK: +#ifndef KTX_PICK  // the knob, or the original expression when the knob is 0
// CHECK: +#define KTX_PICK(knob, original) ((knob) ? (knob) : original)
// CHECK: +#endif
// CHECK: +// ktx:knobs end
// CHECK: -__global__ void scale(float* x, int n) {
// CHECK: +__global__ void __launch_bounds__(KTX_BLOCK_X) scale(float* x, int n) {
// CHECK: -  scale<<<(n + 127) / 128, dim3(std::min(n, 128))>>>(x, n);
// CHECK: +  scale<<<(n + 127) / 128, dim3(KTX_PICK(KTX_BLOCK_X, (std::min(n, 128))))>>>(x, n);
// CONFIG: +// ktx: `block-size` instantiated with BLOCK_X=256
// CONFIG: -__global__ void scale(float* x, int n) {
// CONFIG: +__global__ void __launch_bounds__(256) scale(float* x, int n) {
// CONFIG: -  scale<<<(n + 127) / 128, dim3(std::min(n, 128))>>>(x, n);
// CONFIG: +  scale<<<(n + 127) / 128, dim3(256)>>>(x, n);
