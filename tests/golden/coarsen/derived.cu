// RUN: ktx apply --passes coarsen %s --kernel segment_scale --diff 2>&1 | filecheck %s --match-full-lines
// RUN: ktx apply --passes coarsen %s --kernel counted --diff 2>&1 | filecheck %s --match-full-lines --check-prefix=COUNTED
// Negative: a value computed from blockIdx.x before the index no longer names the item's block
// once each thread takes several items, and work before the index would run fewer times.
__global__ void segment_scale(float* out, const float* in, const float* scale, int n) {
  const int segment = blockIdx.x / 4;
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * scale[segment];
}

__global__ void counted(float* out, const float* in, int* calls, int n) {
  if (threadIdx.x == 0) atomicAdd(calls, 1);
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i];
}

void launch(float* out, const float* in, const float* scale, int* calls, int n) {
  segment_scale<<<(n + 255) / 256, 256>>>(out, in, scale, n);
  counted<<<(n + 255) / 256, 256>>>(out, in, calls, n);
}

// CHECK: {{.*}}: remark: [coarsen] segment_scale: skipped: segment (line 8) is computed from blockIdx.x, which no longer names the item's block
// CHECK-NOT: {{[-+].*}}
// COUNTED: {{.*}}: remark: [coarsen] counted: skipped: `if (threadIdx.x == 0) atomicAdd(calls, 1);` (line 12) runs before the index: a smaller grid would run it fewer times
// COUNTED-NOT: {{[-+].*}}
