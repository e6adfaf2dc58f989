// RUN: ktx apply --passes split %s --diff 2>&1 | filecheck %s --match-full-lines
// Branches of whole statements parse as they are: split rewrites the row loop around them.
__global__ void scale_rows(float* out, const float* in, int C) {
  int row = blockIdx.x;
  for (int i = threadIdx.x; i < C; i += blockDim.x) {
#if __CUDA_ARCH__ >= 800
    float v = __ldg(&in[row * C + i]);
#else
    float v = in[row * C + i];
#endif
    out[row * C + i] = 2.f * v;
  }
}

void launch_scale_rows(float* out, const float* in, int rows, int C) {
  dim3 grid(rows);
  scale_rows<<<grid, 256>>>(out, in, C);
}

// CHECK: {{.*}}: remark: [split] scale_rows: rewritten: exposed SPLIT {1, 2, 4, 8, 16, 32}; row loops L0 interleave over gridDim.y
// CHECK: +// ktx:knobs begin
// CHECK: +// scale_rows templated by `split`.
// CHECK: +// Each KTX_ macro is a knob; the defaults reproduce the original. Pick other values with
// CHECK: +// `ktx apply --config NAME=VALUE` (clean code) or -DKTX_NAME=VALUE.
// CHECK: +#ifndef KTX_SPLIT
// CHECK: +#define KTX_SPLIT 1  // split: blocks per row (grid y); 1: one block walks the row
// CHECK: +#endif
// CHECK: +// ktx:knobs end
// CHECK: -  for (int i = threadIdx.x; i < C; i += blockDim.x) {
// CHECK: +  for (int i = blockIdx.y * blockDim.x + threadIdx.x; i < C; i += blockDim.x * gridDim.y) {
// CHECK: -  dim3 grid(rows);
// CHECK: +  dim3 grid(rows, KTX_SPLIT);
