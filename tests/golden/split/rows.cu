// RUN: ktx apply --passes split %s --diff 2>&1 | filecheck %s --match-full-lines
// RUN: ktx apply --passes split %s --config SPLIT=16 --diff -q | filecheck %s --match-full-lines --check-prefix=CONFIG
// One row per block, walked by block-strided loops (a packed loop and its scalar tail).
__global__ void gelu_rows(float* out, const float* in, int d) {
  const long long row = blockIdx.x;
  const int packs = d / 4;
  for (int i = threadIdx.x; i < packs; i += blockDim.x) {
    float4 v = reinterpret_cast<const float4*>(in + row * d)[i];
    v.x = v.x * normcdff(v.x);
    v.y = v.y * normcdff(v.y);
    v.z = v.z * normcdff(v.z);
    v.w = v.w * normcdff(v.w);
    reinterpret_cast<float4*>(out + row * d)[i] = v;
  }
  for (int i = packs * 4 + threadIdx.x; i < d; i += blockDim.x) out[row * d + i] = in[row * d + i] * normcdff(in[row * d + i]);
}

void launch_gelu_rows(float* out, const float* in, int rows, int d) {
  dim3 grid(rows);
  gelu_rows<<<grid, 256>>>(out, in, d);
}

// CHECK: {{.*}}: remark: [split] gelu_rows: rewritten: exposed SPLIT {1, 2, 4, 8, 16, 32}; row loops L0, L1 interleave over gridDim.y
// CHECK: +// ktx:knobs begin
// CHECK: +// gelu_rows templated by `split`.
// CHECK: +// Each KTX_ macro is a knob; the defaults reproduce the original. Pick other values with
// CHECK: +// `ktx apply --config NAME=VALUE` (clean code) or -DKTX_NAME=VALUE.
// CHECK: +#ifndef KTX_SPLIT
// CHECK: +#define KTX_SPLIT 1  // split: blocks per row (grid y); 1: one block walks the row
// CHECK: +#endif
// CHECK: +// ktx:knobs end
// CHECK: -  for (int i = threadIdx.x; i < packs; i += blockDim.x) {
// CHECK: +  for (int i = blockIdx.y * blockDim.x + threadIdx.x; i < packs; i += blockDim.x * gridDim.y) {
// CHECK: -  for (int i = packs * 4 + threadIdx.x; i < d; i += blockDim.x) out[row * d + i] = in[row * d + i] * normcdff(in[row * d + i]);
// CHECK: +  for (int i = packs * 4 + blockIdx.y * blockDim.x + threadIdx.x; i < d; i += blockDim.x * gridDim.y) out[row * d + i] = in[row * d + i] * normcdff(in[row * d + i]);
// CHECK: -  dim3 grid(rows);
// CHECK: +  dim3 grid(rows, KTX_SPLIT);
// CONFIG: +// ktx: `split` instantiated with SPLIT=16
// CONFIG: -  for (int i = threadIdx.x; i < packs; i += blockDim.x) {
// CONFIG: +  for (int i = blockIdx.y * blockDim.x + threadIdx.x; i < packs; i += blockDim.x * gridDim.y) {
// CONFIG: -  for (int i = packs * 4 + threadIdx.x; i < d; i += blockDim.x) out[row * d + i] = in[row * d + i] * normcdff(in[row * d + i]);
// CONFIG: +  for (int i = packs * 4 + blockIdx.y * blockDim.x + threadIdx.x; i < d; i += blockDim.x * gridDim.y) out[row * d + i] = in[row * d + i] * normcdff(in[row * d + i]);
// CONFIG: -  dim3 grid(rows);
// CONFIG: +  dim3 grid(rows, 16);
