// RUN: ktx apply --passes vectorize %s --diff 2>&1 | filecheck %s --match-full-lines
// Negative: without __restrict__, out may overlap in (out = in + 1 makes each iteration read what
// the previous one wrote); packing the loads ahead of the stores would change the result.
__global__ void shift_add(float* out, const float* in, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    out[i] = in[i] + 1.f;
  }
}

// CHECK: {{.*}}: remark: [vectorize] L0: skipped: aliasing: out[i] and in[i] may touch aliasing memory (line 6 and 6)
// CHECK-NOT: {{[-+].*}}
