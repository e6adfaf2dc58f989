// RUN: ktx apply --passes tile{sizes=2|4} %s --diff 2>&1 | filecheck %s --match-full-lines
// RUN: ktx apply --passes tile{sizes=2|4},unroll %s --config TILE_L0=4 --diff -q | filecheck %s --match-full-lines --check-prefix=CONFIG
// A block-strided loop strip-mined into tiles of TILE_L0 iterations, the tile fully unrolled.
__global__ void square(float* x, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    x[i] = x[i] * x[i];
  }
}

// CHECK: {{.*}}: remark: [tile] L0: rewritten: exposed TILE_L0 {1, 2, 4}
// CHECK: +// ktx:knobs begin
// CHECK: +// square templated by `tile{sizes=2|4}`.
// CHECK: +// Each KTX_ macro is a knob; the defaults reproduce the original. Pick other values with
// CHECK: +// `ktx apply --config NAME=VALUE` (clean code) or -DKTX_NAME=VALUE.
// CHECK: +#ifndef KTX_TILE_L0
// CHECK: +#define KTX_TILE_L0 1  // tile: iterations of loop L0 per tile (1: no tiling)
// CHECK: +#endif
// CHECK: +// ktx:knobs end
// CHECK: -  for (int i = threadIdx.x; i < n; i += blockDim.x) {
// CHECK: -    x[i] = x[i] * x[i];
// CHECK: +  for (int ktx_tile_L0 = threadIdx.x; ktx_tile_L0 < n; ktx_tile_L0 += blockDim.x * KTX_TILE_L0) {
// CHECK: +#pragma unroll
// CHECK: +    for (int ktx_j_L0 = 0; ktx_j_L0 < KTX_TILE_L0; ++ktx_j_L0) {
// CHECK: +      const int i = ktx_tile_L0 + ktx_j_L0 * blockDim.x;
// CHECK: +      if (!(i < n)) break;
// CHECK: +      {
// CHECK: +        x[i] = x[i] * x[i];
// CHECK: +      }
// CHECK: +    }
// CONFIG: +// ktx: `tile{sizes=2|4},unroll` instantiated with TILE_L0=4, UNROLL_L0=0
// CONFIG: -  for (int i = threadIdx.x; i < n; i += blockDim.x) {
// CONFIG: -    x[i] = x[i] * x[i];
// CONFIG: +  for (int ktx_tile_L0 = threadIdx.x; ktx_tile_L0 < n; ktx_tile_L0 += blockDim.x * 4) {
// CONFIG: +#pragma unroll
// CONFIG: +    for (int ktx_j_L0 = 0; ktx_j_L0 < 4; ++ktx_j_L0) {
// CONFIG: +      const int i = ktx_tile_L0 + ktx_j_L0 * blockDim.x;
// CONFIG: +      if (!(i < n)) break;
// CONFIG: +      {
// CONFIG: +        x[i] = x[i] * x[i];
// CONFIG: +      }
// CONFIG: +    }
