// RUN: not ktx apply --passes block-size %s --diff 2>&1 | filecheck %s --match-full-lines
// Negative: the user's macro has exactly the name of the knob's placeholder; ktx says so rather
// than let the header's default and the user's definition fight.
#define KTX_BLOCK_X 4

__global__ void fill(float* x, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] = KTX_BLOCK_X;
}

void launch_fill(float* x, int n) { fill<<<1, dim3(std::min(n, 256))>>>(x, n); }

// CHECK: ktx: error: the source defines KTX_BLOCK_X (line 4), a name ktx uses for a knob placeholder (rename it; ktx leaves every other KTX_ name of yours alone)
// CHECK-NOT: {{[-+].*}}
