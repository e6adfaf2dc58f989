// RUN: ktx apply --passes row-registers %s --config PACKS=2 --diff 2>&1 | filecheck %s --match-full-lines
// A fused residual add: the first loop stores the sum in place of the residual pack it read and
// stashes it in shared memory; the second loop reads the stash back. The stored pack is kept in
// registers (the second loop's head never reads the stash), and since every store of the first
// loop is in place or to shared memory, its loads (x, res) are issued with the scale's, first.
struct alignas(16) F4 {
  float v[4];
  __device__ void load(const float* p) { *reinterpret_cast<float4*>(v) = *reinterpret_cast<const float4*>(p); }
  __device__ void store(float* p) const { *reinterpret_cast<float4*>(p) = *reinterpret_cast<const float4*>(v); }
};

__global__ void add_scale_rows(float* __restrict__ x, float* __restrict__ res,
                               const float* __restrict__ scale, int packs) {
  extern __shared__ float smem[];
  float* stash = smem + 4;
  float* __restrict__ xr = x + blockIdx.x * packs * 4;
  float* __restrict__ rr = res + blockIdx.x * packs * 4;
  float s = 0.f;
  for (int i = threadIdx.x; i < packs; i += blockDim.x) {
    F4 a, r, t;
    a.load(xr + i * 4);
    r.load(rr + i * 4);
    for (int j = 0; j < 4; ++j) t.v[j] = a.v[j] + r.v[j];
    s += t.v[0] + t.v[1] + t.v[2] + t.v[3];
    t.store(rr + i * 4);
    t.store(stash + i * 4);
  }
  if (threadIdx.x == 0) smem[0] = 0.f;
  __syncthreads();
  atomicAdd(&smem[0], s);
  __syncthreads();
  for (int i = threadIdx.x; i < packs; i += blockDim.x) {
    F4 t, w, o;
    t.load(stash + i * 4);
    w.load(scale + i * 4);
    for (int j = 0; j < 4; ++j) o.v[j] = t.v[j] * w.v[j] / smem[0];
    o.store(xr + i * 4);
  }
}

// CHECK: {{.*}}: remark: [row-registers] add_scale_rows: rewritten: exposed PACKS {0, 1, 2, 4}; loops at line 19 and line 32; loads in registers: t (stored), w (early); the first loop's loads issued first: a, r
// CHECK: +// ktx: `row-registers` instantiated with PACKS=2
// CHECK: -  for (int i = threadIdx.x; i < packs; i += blockDim.x) {
// CHECK: +  F4 ktx_keep_t[2];
// CHECK: +  F4 ktx_keep_w[2];
// CHECK: +  F4 ktx_pre_a[2];
// CHECK: +  F4 ktx_pre_r[2];
// CHECK: +#pragma unroll
// CHECK: +  for (int ktx_k = 0; ktx_k < 2; ++ktx_k) {
// CHECK: +    const int i = (threadIdx.x) + ktx_k * (blockDim.x);
// CHECK: +    if (i < packs) { ktx_pre_a[ktx_k].load(xr + i * 4); ktx_pre_r[ktx_k].load(rr + i * 4); ktx_keep_w[ktx_k].load(scale + i * 4); }
// CHECK: +  }
// CHECK: +#pragma unroll
// CHECK: +  for (int ktx_k = 0; ktx_k < 2; ++ktx_k) {
// CHECK: +    const int i = (threadIdx.x) + ktx_k * (blockDim.x);
// CHECK: +    if (i < packs) {
// CHECK: +    F4 a, r, t;
// CHECK: +    a = ktx_pre_a[ktx_k];
// CHECK: +    r = ktx_pre_r[ktx_k];
// CHECK: +    for (int j = 0; j < 4; ++j) t.v[j] = a.v[j] + r.v[j];
// CHECK: +    s += t.v[0] + t.v[1] + t.v[2] + t.v[3];
// CHECK: +    t.store(rr + i * 4);
// CHECK: +    t.store(stash + i * 4); ktx_keep_t[ktx_k] = t;
// CHECK: +  }
// CHECK: +  }
// CHECK: +  for (int i = (threadIdx.x) + 2 * (blockDim.x); i < packs; i += blockDim.x) {
// CHECK: -  for (int i = threadIdx.x; i < packs; i += blockDim.x) {
// CHECK: +#pragma unroll
// CHECK: +  for (int ktx_k = 0; ktx_k < 2; ++ktx_k) {
// CHECK: +    const int i = (threadIdx.x) + ktx_k * (blockDim.x);
// CHECK: +    if (i < packs) {
// CHECK: +    F4 t, w, o;
// CHECK: +    t = ktx_keep_t[ktx_k];
// CHECK: +    w = ktx_keep_w[ktx_k];
// CHECK: +    for (int j = 0; j < 4; ++j) o.v[j] = t.v[j] * w.v[j] / smem[0];
// CHECK: +    o.store(xr + i * 4);
// CHECK: +  }
// CHECK: +  }
// CHECK: +  for (int i = (threadIdx.x) + 2 * (blockDim.x); i < packs; i += blockDim.x) {
