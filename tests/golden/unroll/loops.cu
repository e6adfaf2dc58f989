// RUN: ktx apply --passes unroll %s --diff 2>&1 | filecheck %s --match-full-lines
// RUN: ktx apply --passes unroll{max=4} %s --config UNROLL_L0=4 UNROLL_L1=0 --diff -q | filecheck %s --match-full-lines --check-prefix=CONFIG
// One knob per loop; an existing factor is the default; a bare pragma is left alone.
__global__ void scale(float* x, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
#pragma unroll 2
    for (int j = 0; j < 8; ++j) x[i * 8 + j] *= 2.f;
#pragma unroll
    for (int j = 0; j < 4; ++j) x[i * 8 + j] += 1.f;
  }
}

// CHECK: {{.*}}: remark: [unroll] L0: rewritten: exposed UNROLL_L0 {0, 1, 2, 4, 8}
// CHECK: {{.*}}: remark: [unroll] L1: rewritten: exposed UNROLL_L1 {0, 1, 2, 4, 8}
// CHECK: {{.*}}: remark: [unroll] L2: skipped: already fully unrolled by a bare #pragma unroll
// CHECK: +// ktx:knobs begin
// CHECK: +// scale templated by `unroll`.
// CHECK: +// Each KTX_ macro is a knob; the defaults reproduce the original. Pick other values with
// CHECK: +// `ktx apply --config NAME=VALUE` (clean code) or -DKTX_NAME=VALUE.
// CHECK: +#ifndef KTX_UNROLL_L0
// CHECK: +#define KTX_UNROLL_L0 0  // unroll: unroll factor of loop L0 (0: no pragma)
// CHECK: +#endif
// CHECK: +#ifndef KTX_UNROLL_L1
// CHECK: +#define KTX_UNROLL_L1 2  // unroll: unroll factor of loop L1 (0: no pragma)
// CHECK: +#endif
// CHECK: +#pragma nv_diag_suppress 20168  // `#pragma unroll 0` (compiler's choice) is ignored
// CHECK: +static constexpr int ktx_UNROLL_L0 = KTX_UNROLL_L0;  // #pragma unroll does not expand macros
// CHECK: +static constexpr int ktx_UNROLL_L1 = KTX_UNROLL_L1;  // #pragma unroll does not expand macros
// CHECK: +// ktx:knobs end
// CHECK: +  #pragma unroll ktx_UNROLL_L0
// CHECK: -#pragma unroll 2
// CHECK: +#pragma unroll ktx_UNROLL_L1
// CONFIG: +// ktx: `unroll{max=4}` instantiated with UNROLL_L0=4, UNROLL_L1=0
// CONFIG: +  #pragma unroll 4
// CONFIG: -#pragma unroll 2
