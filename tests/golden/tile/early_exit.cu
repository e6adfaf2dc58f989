// RUN: ktx apply --passes tile %s --diff 2>&1 | filecheck %s --match-full-lines
// Negative: a break would leave the tile, not the loop.
__global__ void until_negative(float* x, int n) {
  for (int i = 0; i < n; ++i) {
    if (x[i] < 0.f) break;
    x[i] = sqrtf(x[i]);
  }
}

// CHECK: {{.*}}: remark: [tile] L0: skipped: the body breaks out of the loop (line 5)
// CHECK-NOT: {{[-+].*}}
