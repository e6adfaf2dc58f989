// RUN: ktx apply --passes online %s --diff 2>&1 | filecheck %s --match-full-lines
// Negative: the sum reads another array than the max did, so exp(x - max) cannot be rescaled
// from the running max of the same elements: skipped, naming the two elements.
__global__ void mixed(float* out, const float* a, const float* b, int n, int c) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < n) {
    float m = -INFINITY;
    for (int j = 0; j < c; j++) m = fmaxf(m, a[r * c + j]);
    float s = 0.f;
    for (int j = 0; j < c; j++) s += expf(b[r * c + j] - m);
    out[r] = s;
  }
}

void launch_mixed(float* out, const float* a, const float* b, int n, int c) {
  mixed<<<(n + 127) / 128, 128>>>(out, a, b, n, c);
}

// CHECK: {{.*}}: remark: [online] mixed: skipped: line 10: the sum s after the max m (line 8): the sum reads b[r*c+j], the max read a[r*c+j]; they must be the same element
// CHECK-NOT: {{[-+].*}}
