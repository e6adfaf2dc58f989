// RUN: ktx apply --passes row-owner %s --diff 2>&1 | filecheck %s --match-full-lines
// Negative: a running (prefix) sum along the row stores the accumulator at every element, so
// each iteration reads what the one before it left: lanes cannot split it.
__global__ void row_cumsum(float* __restrict__ out, const float* __restrict__ inp, int rows, int n) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < rows) {
    float acc = 0.f;
    for (int k = 0; k < n; k++) {
      acc += inp[row * n + k];
      out[row * n + k] = acc;
    }
  }
}

void launch_row_cumsum(float* out, const float* inp, int rows, int n) {
  row_cumsum<<<(rows + 127) / 128, 128>>>(out, inp, rows, n);
}

// CHECK: {{.*}}: remark: [row-owner] row_cumsum: skipped: line 10: the row loop at line 8 reads acc between its updates: a lane would see only its own partial value
// CHECK-NOT: {{[-+].*}}
