// RUN: ktx apply --passes vectorize %s --diff 2>&1 | filecheck %s --match-full-lines
// Negative: out and in may alias and are indexed differently (out[i], in[i + 1]): which element
// of one range meets which of the other depends on more than a range check, so no packs.
__global__ void next_add(float* out, const float* in, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n - 1; i += blockDim.x * gridDim.x) {
    out[i] = in[i + 1] + 1.f;
  }
}

// CHECK: {{.*}}: remark: [vectorize] L0: skipped: aliasing: out[i] and in[i + 1] may touch aliasing memory (line 6 and 6)
// CHECK-NOT: {{[-+].*}}
