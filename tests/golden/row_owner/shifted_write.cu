// RUN: ktx apply --passes row-owner %s --diff 2>&1 | filecheck %s --match-full-lines
// Negative: a row loop reads the element its previous iteration wrote (a first-order
// recurrence through memory); with lanes striding the row, that element belongs to another lane.
__global__ void row_smooth(float* y, const float* x, int rows, int n, float a) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < rows) {
    float* yr = y + row * n;
    yr[0] = x[row * n];
    for (int k = 1; k < n; k++) yr[k] = a * yr[k - 1] + (1.f - a) * x[row * n + k];
  }
}

void launch_row_smooth(float* y, const float* x, int rows, int n, float a) {
  row_smooth<<<(rows + 127) / 128, 128>>>(y, x, rows, n, a);
}

// CHECK: {{.*}}: remark: [row-owner] row_smooth: skipped: line 9: yr[k - 1] and yr[k] (line 9) touch different elements of y, which a row loop writes: with lanes striding the row another lane may own one
// CHECK-NOT: {{[-+].*}}
