// RUN: ktx apply --passes split %s --diff 2>&1 | filecheck %s --match-full-lines
// Negative: one element per thread (llm.c's gelu kernel1 shape) has no row loop to split.
__global__ void gelu1(float* out, const float* inp, int N) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) {
    float xi = inp[i];
    out[i] = 0.5f * xi * (1.0f + tanhf(0.7978845608f * (xi + 0.044715f * xi * xi * xi)));
  }
}

void launch_gelu1(float* out, const float* inp, int N) { gelu1<<<(N + 127) / 128, 128>>>(out, inp, N); }

// CHECK: {{.*}}: remark: [split] gelu1: skipped: one element per thread (i = blockIdx.x * blockDim.x + threadIdx.x at line 4, guarded by i < N at line 5): no row loop to split; the grid already covers the elements
// CHECK-NOT: {{[-+].*}}
