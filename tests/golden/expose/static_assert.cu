// RUN: ktx apply --passes expose %s --diff 2>&1 | filecheck %s --match-full-lines
// A constant fed to a static_assert: only the values the assert accepts are offered (VEC 16 and
// 32 would break the 16-byte pack). The block literal sets the block only: the grid's 256 stays.
#include <cuda_bf16.h>
constexpr int VEC = 8;
struct alignas(16) Pack { __nv_bfloat16 v[VEC]; };
static_assert(sizeof(Pack) <= 16, "a pack is at most 16 bytes");
static_assert(VEC * sizeof(__nv_bfloat16) <= 16, "one 16-byte load");

__global__ void copy(__nv_bfloat16* out, const __nv_bfloat16* in, int n) {
  int i = (blockIdx.x * blockDim.x + threadIdx.x) * VEC;
  if (i + VEC <= n) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) out[i + j] = in[i + j];
  }
}

void launch(__nv_bfloat16* out, const __nv_bfloat16* in, int n) {
  copy<<<(n / VEC + 255) / 256, 256>>>(out, in, n);
}

// CHECK: {{.*}}: remark: [expose] VEC: rewritten: exposed VEC {2, 4, 8}; the kernel's static_assert limits VEC to {2, 4, 8}; launch mapping: 8 -> VEC in grid[0]
// CHECK: {{.*}}: remark: [expose] BLOCK: rewritten: exposed BLOCK {64, 128, 256, 512, 1024}; launch mapping: 256 -> BLOCK in block[0]
// CHECK: -constexpr int VEC = 8;
// CHECK: +// ktx:knobs begin
// CHECK: +// copy templated by `expose`.
// CHECK: +// Each KTX_ macro is a knob; the defaults reproduce the original. Pick other values with
// CHECK: +// `ktx apply --config NAME=VALUE` (clean code) or -DKTX_NAME=VALUE.
// CHECK: +#ifndef KTX_VEC
// CHECK: +#define KTX_VEC 8  // expose: constexpr VEC (was 8)
// CHECK: +#endif
// CHECK: +#ifndef KTX_BLOCK
// CHECK: +#define KTX_BLOCK 256  // expose: launch literal for copy@19:33 (was 256)
// CHECK: +#endif
// CHECK: +// ktx:knobs end
// CHECK: +constexpr int VEC = KTX_VEC;
// CHECK: -  copy<<<(n / VEC + 255) / 256, 256>>>(out, in, n);
// CHECK: +  copy<<<(n / VEC + 255) / 256, KTX_BLOCK>>>(out, in, n);
