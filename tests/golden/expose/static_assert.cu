// RUN: ktx apply --passes expose %s --diff 2>&1 | filecheck %s --match-full-lines
// A constant fed to a static_assert: only the values the assert accepts are offered (VEC 16 and
// 32 would break the 16-byte pack). The block literal is no knob: the grid rounds by the same 256,
// and a smaller block under that grid would leave elements unwritten (block-size moves both).
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
// CHECK: {{.*}}: remark: [expose] BLOCK: skipped: the grid repeats the block's 256 (line 20): a knob for the block alone would leave the grid sized for the old block (elements left unwritten); block-size moves both
// CHECK: -constexpr int VEC = 8;
// CHECK: +// ktx:knobs begin
// CHECK: +// copy templated by `expose`.
// CHECK: +// Each KTX_ macro is a knob; the defaults reproduce the original. Pick other values with
// CHECK: +// `ktx apply --config NAME=VALUE` (clean code) or -DKTX_NAME=VALUE.
// CHECK: +#ifndef KTX_VEC
// CHECK: +#define KTX_VEC 8  // expose: constexpr VEC (was 8)
// CHECK: +#endif
// CHECK: +// ktx:knobs end
// CHECK: +constexpr int VEC = KTX_VEC;
// CHECK-NOT: KTX_BLOCK

