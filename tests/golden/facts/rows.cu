// RUN: ktx inspect --facts %s | filecheck %s --match-full-lines
// A block-stride loop over a row reached through a local pointer; the element type is a template
// parameter bound by the launch (__half: 2 bytes); a vector cast reads 4 root elements per access.
template <typename T>
__global__ void rowsum(T* __restrict__ out, const T* __restrict__ in, int d) {
  const T* row = in + blockIdx.x * d;
  float s = 0.f;
  for (int i = threadIdx.x; i < d; i += blockDim.x) {
    s += (float)row[i];
    out[blockIdx.x * d + i] = row[i];
  }
  if (threadIdx.x == 0) out[blockIdx.x] = s;
}

__global__ void copy4(float* __restrict__ out, const float* __restrict__ in, int n4) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += blockDim.x * gridDim.x)
    reinterpret_cast<float4*>(out)[i] = reinterpret_cast<const float4*>(in)[i];
}

void go(__half* y, const __half* x, float* o, const float* p, int rows, int d, int n4) {
  rowsum<__half><<<rows, 128>>>(y, x, d);
  copy4<<<132, 256>>>(o, p, n4);
}

// CHECK: kernel rowsum (line 4)
// CHECK:   launch: line 21 <<<rows, 128>>> template <__half>
// CHECK:   template args: __half
// CHECK:   loop L0 line 8 depth 0: i from threadIdx.x step blockDim.x while i < d; owner block, partitions
// CHECK:   ref line 9: load row[i] root in index blockIdx.x*d + i elt __half 2B unconditional alias restrict:in loop L0
// CHECK:   ref line 10: store out[blockIdx.x * d + i] root out index blockIdx.x*d + i elt __half 2B unconditional alias restrict:out loop L0
// CHECK:   ref line 10: load row[i] root in index blockIdx.x*d + i elt __half 2B unconditional alias restrict:in loop L0
// CHECK:   ref line 12: store out[blockIdx.x] root out index blockIdx.x elt __half 2B conditional alias restrict:out
// CHECK:   reduction line 9: s += (float)row[i]
// CHECK:   pack L0: no, out is also accessed at line 12 with no __syncthreads() in between; packs change which thread owns each element
// CHECK: kernel copy4 (line 15)
// CHECK:   launch: line 22 <<<132, 256>>>
// CHECK:   loop L1 line 16 depth 0: i from blockDim.x*blockIdx.x + threadIdx.x step blockDim.x*gridDim.x while i < n4; owner grid, partitions
// CHECK:   ref line 17: store reinterpret_cast<float4*>(out)[i] root out index 4*i elt float 4B unit float4 x4 unconditional alias restrict:out loop L1
// CHECK:   ref line 17: load reinterpret_cast<const float4*>(in)[i] root in index 4*i elt float 4B unit float4 x4 unconditional alias restrict:in loop L1
// CHECK:   pack L1: no, reinterpret_cast<float4*>(out) is written and also accessed under a condition or out of line in the body: packs would read it before their stores
