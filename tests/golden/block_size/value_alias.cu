// RUN: ktx apply --passes block-size %s --diff 2>&1 | filecheck %s --match-full-lines
// Negative: the kernel strides by TPB, whose value is the block every launch passes as a
// literal. A knob on the launch alone would leave TPB behind, so the pass refuses and says how
// to make it work (pass TPB at the launch: then TPB itself becomes the knob).
#define TPB 256

__global__ void fill(float* x, int n) {
  for (int i = threadIdx.x; i < n; i += TPB) x[i] = 0.f;
  if (threadIdx.x < n) x[threadIdx.x] += blockDim.x;
}

void launch_fill(float* x, int n) { fill<<<1, 256>>>(x, n); }

// CHECK: {{.*}}: remark: [block-size] fill: skipped: the kernel reads TPB (= 256, the block size every launch passes as a literal): it may assume blockDim == 256; pass TPB at the launch so that one knob moves both
// CHECK-NOT: {{[-+].*}}
