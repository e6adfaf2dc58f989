// RUN: ktx apply --passes block-size %s --diff 2>&1 | filecheck %s --match-full-lines
// The user's macro has exactly the name of the knob's placeholder: the pass leaves that site,
// saying why and where, rather than let the header's default and the user's definition fight;
// the rest of the pipeline goes on.
#define KTX_BLOCK_X 4

__global__ void fill(float* x, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] = KTX_BLOCK_X;
}

void launch_fill(float* x, int n) { fill<<<1, dim3(std::min(n, 256))>>>(x, n); }

// CHECK: {{.*}}: remark: [block-size] fill: skipped: the knob's placeholder KTX_BLOCK_X is a name of your source (line 5); rename yours to let block-size expose BLOCK_X
// CHECK-NOT: {{[-+].*}}
