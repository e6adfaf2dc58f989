// RUN: ktx apply --passes expose %s --diff 2>&1 | filecheck %s --match-full-lines
// Negative: a warp-size constant and a pack width computed from sizeof are not performance knobs.
constexpr int WARP_SIZE = 32;

__global__ void warp_max(float* x) {
  float v = x[threadIdx.x];
  for (int o = WARP_SIZE / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  x[threadIdx.x] = v;
}

void launch_warp_max(float* x) {
  constexpr int pack = 16 / sizeof(float);
  warp_max<<<1, WARP_SIZE * pack / 4>>>(x);
}

// CHECK: {{.*}}: remark: [expose] WARP_SIZE: skipped: WARP_SIZE is the warp size, fixed by the hardware
// CHECK: {{.*}}: remark: [expose] pack: skipped: pack is computed from sizeof: a pack width tied to the element type
// CHECK-NOT: {{[-+].*}}
