// RUN: ktx apply --passes expose %s --diff 2>&1 | filecheck %s --match-full-lines
// TOPK lays out the input (blockIdx.x * TOPK * d offsets a pointer parameter): it selects what
// is computed, so it is refused; the block literal is still a knob.
template <typename T, int TOPK>
__global__ void moe_sum(T* out, const T* in, int d) {
  const T* x = in + blockIdx.x * TOPK * d;
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    float acc = 0.f;
#pragma unroll
    for (int k = 0; k < TOPK; ++k) acc += float(x[k * d + i]);
    out[blockIdx.x * d + i] = T(acc);
  }
}

void launch(float* out, const float* in, int tokens, int d) {
  moe_sum<float, 2><<<tokens, 256>>>(out, in, d);
}

// CHECK: {{.*}}: remark: [expose] TOPK: skipped: TOPK sizes the data (blockIdx.x * TOPK * d at line 6): it selects what is computed, not how fast, and the spec and the reference depend on it
// CHECK: {{.*}}: remark: [expose] BLOCK: rewritten: exposed BLOCK {64, 128, 256, 512, 1024}; launch mapping: 256 -> BLOCK in block[0]
// CHECK: +// ktx:knobs begin
// CHECK: +// moe_sum templated by `expose`.
// CHECK: +// Each KTX_ macro is a knob; the defaults reproduce the original. Pick other values with
// CHECK: +// `ktx apply --config NAME=VALUE` (clean code) or -DKTX_NAME=VALUE.
// CHECK: +#ifndef KTX_BLOCK
// CHECK: +#define KTX_BLOCK 256  // expose: launch literal for moe_sum@16:31 (was 256)
// CHECK: +#endif
// CHECK: +// ktx:knobs end
// CHECK: -  moe_sum<float, 2><<<tokens, 256>>>(out, in, d);
// CHECK: +  moe_sum<float, 2><<<tokens, KTX_BLOCK>>>(out, in, d);
