// RUN: ktx apply --passes block-size %s --knobs -q 2>&1 | filecheck %s --match-full-lines
// RUN: ktx apply --passes block-size %s -o /dev/null 2>&1 | filecheck %s --match-full-lines --check-prefix=REMARK
// The block is a name, but the grid writes its value as a literal: a knob on the block would
// leave the grid sized for 256 threads (blocks of 128 would cover half the elements), so the
// pass refuses, as it does for a literal block.
constexpr int BS = 256;

__global__ void fill(float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 1.f;
}

void launch(float* y, int n) {
  fill<<<(n + 255) / 256, BS>>>(y, n);
}

// CHECK: {
// CHECK:   "kernel": "fill",
// CHECK:   "pipeline": "block-size",
// CHECK:   "knobs": [],
// CHECK:   "constraints": [],
// CHECK:   "launch": {"grid": ["(n + 255) // 256"], "block": ["256"], "shared": "0"},
// CHECK:   "name_expression": "fill",
// CHECK:   "template_args": []
// CHECK: }
// REMARK: {{.*}}: remark: [block-size] fill: skipped: the grid repeats the block's literal 256 (line 14); name it (a constexpr) or run expose first, so both follow the knob
