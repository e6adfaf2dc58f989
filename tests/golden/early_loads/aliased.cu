// RUN: ktx apply --passes early-loads %s --diff 2>&1 | filecheck %s --match-full-lines
// Negative: the weight pointer is not __restrict__, so a store of the kernel may change what it
// reads (the output could alias it); its loads stay after the reduction.
struct alignas(16) F4 {
  float v[4];
  __device__ void load(const float* p) { *reinterpret_cast<float4*>(v) = *reinterpret_cast<const float4*>(p); }
};

__global__ void scale_rows(float* y, const float* x, const float* w, int n4) {
  __shared__ float part[32];
  float s = 0.f;
  for (int i = threadIdx.x; i < n4; i += blockDim.x) s += x[blockIdx.x * n4 * 4 + i * 4];
  if (threadIdx.x == 0) part[0] = 0.f;
  __syncthreads();
  atomicAdd(&part[0], s);
  __syncthreads();
  for (int i = threadIdx.x; i < n4; i += blockDim.x) {
    F4 b;
    b.load(w + i * 4);
    for (int j = 0; j < 4; ++j) y[blockIdx.x * n4 * 4 + i * 4 + j] = b.v[j] * part[0];
  }
}

void launch_scale_rows(float* y, const float* x, const float* w, int rows, int n4) {
  scale_rows<<<rows, 128>>>(y, x, w, n4);
}

// CHECK: {{.*}}: remark: [early-loads] scale_rows: skipped: L1: loop L1 has no load to issue early (w (line 19) is not a const __restrict__ pointer)
// CHECK-NOT: {{[-+].*}}
