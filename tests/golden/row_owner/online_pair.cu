// RUN: ktx apply --passes row-owner %s --diff 2>&1 | filecheck %s --match-full-lines
// Negative: the online softmax keeps a running max and a sum rescaled whenever the max moves.
// The pair is one reduction of (max, sum) pairs, not two independent ones: refused, naming it.
__global__ void online_softmax(float* out, const float* inp, int rows, int n) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < rows) {
    const float* x = inp + row * n;
    float m = -INFINITY;
    float s = 0.f;
    for (int k = 0; k < n; k++) {
      float v = x[k];
      if (v > m) {
        s = s * expf(m - v) + 1.f;
        m = v;
      } else {
        s += expf(v - m);
      }
    }
    for (int k = 0; k < n; k++) out[row * n + k] = expf(x[k] - m) / s;
  }
}

void launch_online_softmax(float* out, const float* inp, int rows, int n) {
  online_softmax<<<(rows + 127) / 128, 128>>>(out, inp, rows, n);
}

// CHECK: {{.*}}: remark: [row-owner] online_softmax: skipped: line 13: the update of s reads m, which the row loop at line 10 also carries: a coupled pair such as the online softmax's running max and rescaled sum is not a reduction this pass splits across lanes
// CHECK-NOT: {{[-+].*}}
