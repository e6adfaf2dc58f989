// RUN: ktx apply --passes row-registers %s --config PACKS=2 --diff 2>&1 | filecheck %s --match-full-lines
// A block per row, two loops with one header around a block reduction: the second loop's load of
// the row is the first loop's (kept in registers), and the head's loads of the row and of the scale
// (early) are all issued before the first loop's math, so one memory latency precedes the barrier.
// Rows longer than 2 packs a thread keep the loops.
struct alignas(16) F4 {
  float v[4];
  __device__ void load(const float* p) { *reinterpret_cast<float4*>(v) = *reinterpret_cast<const float4*>(p); }
  __device__ void store(float* p) const { *reinterpret_cast<float4*>(p) = *reinterpret_cast<const float4*>(v); }
};

__global__ void scale_rows(float* __restrict__ out, const float* __restrict__ x,
                           const float* __restrict__ scale, int packs) {
  __shared__ float total;
  const float* __restrict__ row = x + blockIdx.x * packs * 4;
  if (threadIdx.x == 0) total = 0.f;
  __syncthreads();
  float s = 0.f;
  for (int i = threadIdx.x; i < packs; i += blockDim.x) {
    F4 a;
    a.load(row + i * 4);
    s += a.v[0] + a.v[1] + a.v[2] + a.v[3];
  }
  atomicAdd(&total, s);
  __syncthreads();
  for (int i = threadIdx.x; i < packs; i += blockDim.x) {
    F4 a, w, o;
    a.load(row + i * 4);
    w.load(scale + i * 4);
    for (int j = 0; j < 4; ++j) o.v[j] = a.v[j] * w.v[j] / total;
    o.store(out + blockIdx.x * packs * 4 + i * 4);
  }
}

void launch(float* out, const float* x, const float* scale, int rows, int packs) {
  scale_rows<<<rows, 256>>>(out, x, scale, packs);
}

// CHECK: {{.*}}: remark: [row-registers] scale_rows: rewritten: exposed PACKS {0, 1, 2, 4}; loops at line 19 and line 26; loads in registers: a (kept), w (early)
// CHECK: +// ktx: `row-registers` instantiated with PACKS=2
// CHECK: -  for (int i = threadIdx.x; i < packs; i += blockDim.x) {
// CHECK: +  F4 ktx_keep_a[2];
// CHECK: +  F4 ktx_keep_w[2];
// CHECK: +#pragma unroll
// CHECK: +  for (int ktx_k = 0; ktx_k < 2; ++ktx_k) {
// CHECK: +    const int i = (threadIdx.x) + ktx_k * (blockDim.x);
// CHECK: +    if (i < packs) { ktx_keep_a[ktx_k].load(row + i * 4); ktx_keep_w[ktx_k].load(scale + i * 4); }
// CHECK: +  }
// CHECK: +#pragma unroll
// CHECK: +  for (int ktx_k = 0; ktx_k < 2; ++ktx_k) {
// CHECK: +    const int i = (threadIdx.x) + ktx_k * (blockDim.x);
// CHECK: +    if (i < packs) {
// CHECK: +    F4 a;
// CHECK: +    a = ktx_keep_a[ktx_k];
// CHECK: +    s += a.v[0] + a.v[1] + a.v[2] + a.v[3];
// CHECK: +  }
// CHECK: +  }
// CHECK: +  for (int i = (threadIdx.x) + 2 * (blockDim.x); i < packs; i += blockDim.x) {
// CHECK: -  for (int i = threadIdx.x; i < packs; i += blockDim.x) {
// CHECK: +#pragma unroll
// CHECK: +  for (int ktx_k = 0; ktx_k < 2; ++ktx_k) {
// CHECK: +    const int i = (threadIdx.x) + ktx_k * (blockDim.x);
// CHECK: +    if (i < packs) {
// CHECK: +    F4 a, w, o;
// CHECK: +    a = ktx_keep_a[ktx_k];
// CHECK: +    w = ktx_keep_w[ktx_k];
// CHECK: +    for (int j = 0; j < 4; ++j) o.v[j] = a.v[j] * w.v[j] / total;
// CHECK: +    o.store(out + blockIdx.x * packs * 4 + i * 4);
// CHECK: +  }
// CHECK: +  }
// CHECK: +  for (int i = (threadIdx.x) + 2 * (blockDim.x); i < packs; i += blockDim.x) {
