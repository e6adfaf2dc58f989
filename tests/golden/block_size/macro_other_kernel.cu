// RUN: ktx apply --passes block-size --kernel tiled %s --diff 2>&1 | filecheck %s --match-full-lines
// Negative: TILE is the block size of `tiled`, but `copy` reads it as a plain constant, so a knob
// on TILE would change `copy` as well.
#define TILE 256

__global__ void tiled(float* x, int n) {
  for (int i = threadIdx.x; i < n; i += TILE) x[i] *= 2.f;
}

__global__ void copy(float* y, const float* x) { y[blockIdx.x * TILE + threadIdx.x * 2] = x[0]; }

void launch_tiled(float* x, int n) { tiled<<<1, TILE>>>(x, n); }

// CHECK: {{.*}}: remark: [block-size] tiled: skipped: TILE is also read by kernel copy, where it is not the block size: a knob on it would change that kernel too
// CHECK-NOT: {{[-+].*}}
