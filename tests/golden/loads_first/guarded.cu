// RUN: ktx apply --passes loads-first %s --diff 2>&1 | filecheck %s --match-full-lines
// Negative: the only statement between the address and the load is the bounds guard over the
// address, which must stay above the load.
struct alignas(16) F4 {
  float v[4];
  __device__ void load(const float* p) { *reinterpret_cast<float4*>(v) = *reinterpret_cast<const float4*>(p); }
};

__global__ void copy4(float* __restrict__ out, const float* __restrict__ a, int n4) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  F4 x;
  if (i >= n4) return;
  x.load(a + i * 4);
  for (int j = 0; j < 4; ++j) out[i * 4 + j] = x.v[j];
}

void launch_copy4(float* out, const float* a, int n4) { copy4<<<(n4 + 127) / 128, 128>>>(out, a, n4); }

// CHECK: {{.*}}: remark: [loads-first] copy4: skipped: no straight-line load to issue earlier (line 13: already issued where its address is known)
// CHECK-NOT: {{[-+].*}}
