// RUN: ktx apply --passes unroll %s --diff 2>&1 | filecheck %s --match-full-lines
// Negative: the only loop is fully unrolled already; a remark, no change.
__global__ void add4(float* x) {
#pragma unroll
  for (int j = 0; j < 4; ++j) x[threadIdx.x * 4 + j] += 1.f;
}

// CHECK: {{.*}}: remark: [unroll] L0: skipped: already fully unrolled by a bare #pragma unroll
// CHECK-NOT: {{[-+].*}}
