// RUN: ktx apply --passes early-loads %s --diff 2>&1 | filecheck %s --match-full-lines
// RUN: ktx apply --passes early-loads %s --config PREFETCH=2 --diff -q | filecheck %s --match-full-lines --check-prefix=CONFIG
// A row norm in float4 packs: the second loop's loads (the row again, the weight) do not
// depend on the reduction; with PREFETCH = P they are issued for P packs per thread before it.
struct alignas(16) F4 {
  float v[4];
  __device__ void load(const float* p) { *reinterpret_cast<float4*>(v) = *reinterpret_cast<const float4*>(p); }
};

__global__ void norm_rows(float* __restrict__ y, const float* __restrict__ x, const float* __restrict__ w, int n4) {
  __shared__ float part[32];
  const float* __restrict__ row = x + blockIdx.x * n4 * 4;
  float s = 0.f;
  for (int i = threadIdx.x; i < n4; i += blockDim.x) {
    F4 a;
    a.load(row + i * 4);
    for (int j = 0; j < 4; ++j) s += a.v[j] * a.v[j];
  }
  for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int k = 1; k < blockDim.x / 32; ++k) part[0] += part[k];
  }
  __syncthreads();
  const float scale = rsqrtf(part[0] / (n4 * 4) + 1e-6f);
  for (int i = threadIdx.x; i < n4; i += blockDim.x) {
    F4 a, b;
    a.load(row + i * 4);
    b.load(w + i * 4);
    for (int j = 0; j < 4; ++j) y[blockIdx.x * n4 * 4 + i * 4 + j] = a.v[j] * b.v[j] * scale;
  }
}

void launch_norm_rows(float* y, const float* x, const float* w, int rows, int n4) {
  norm_rows<<<rows, 256>>>(y, x, w, n4);
}

// CHECK: {{.*}}: remark: [early-loads] L4: rewritten: exposed PREFETCH {0, 1, 2, 4}; loads of w in loop L4 can go before the reduction; loop L4 takes the packs of row that loop L0 loaded (registers)
// CHECK: +// ktx:knobs begin
// CHECK: +// norm_rows templated by `early-loads`.
// CHECK: +// Each KTX_ macro is a knob; the defaults reproduce the original. Pick other values with
// CHECK: +// `ktx apply --config NAME=VALUE` (clean code) or -DKTX_NAME=VALUE.
// CHECK: +#ifndef KTX_PREFETCH
// CHECK: +#define KTX_PREFETCH 0  // early-loads: iterations of the loop after the reduction whose loads go before it (0: as written)
// CHECK: +#endif
// CHECK: +// ktx:knobs end
// CHECK: +#if KTX_PREFETCH > 0
// CHECK: +  // early-loads: loop L4 takes these packs from here, not from memory
// CHECK: +  F4 ktx_pf_a[KTX_PREFETCH];
// CHECK: +#pragma unroll
// CHECK: +  for (int ktx_k = 0; ktx_k < KTX_PREFETCH; ++ktx_k) {
// CHECK: +    const int i = threadIdx.x + ktx_k * blockDim.x;
// CHECK: +    if (i < n4) {
// CHECK: +      F4 a;
// CHECK: +      a.load(row + i * 4); ktx_pf_a[ktx_k] = a;
// CHECK: +      for (int j = 0; j < 4; ++j) s += a.v[j] * a.v[j];
// CHECK: +    }
// CHECK: +  }
// CHECK: +  for (int i = threadIdx.x + KTX_PREFETCH * blockDim.x; i < n4; i += blockDim.x) {
// CHECK: +    F4 a;
// CHECK: +    a.load(row + i * 4);
// CHECK: +    for (int j = 0; j < 4; ++j) s += a.v[j] * a.v[j];
// CHECK: +  }
// CHECK: +#else
// CHECK: +#if KTX_PREFETCH > 0
// CHECK: +  // early-loads: the loads of loop L4 (w) for its first KTX_PREFETCH iterations, issued before the reduction
// CHECK: +  F4 ktx_pf_b[KTX_PREFETCH];
// CHECK: +#pragma unroll
// CHECK: +  for (int ktx_k = 0; ktx_k < KTX_PREFETCH; ++ktx_k) {
// CHECK: +    const int i = threadIdx.x + ktx_k * blockDim.x;
// CHECK: +    if (i < n4) {
// CHECK: +      ktx_pf_b[ktx_k].load(w + i * 4);
// CHECK: +    }
// CHECK: +  }
// CHECK: +#endif
// CHECK: +#endif
// CHECK: +#if KTX_PREFETCH > 0
// CHECK: +#pragma unroll
// CHECK: +  for (int ktx_k = 0; ktx_k < KTX_PREFETCH; ++ktx_k) {
// CHECK: +    const int i = threadIdx.x + ktx_k * blockDim.x;
// CHECK: +    if (i < n4) {
// CHECK: +      F4 a, b;
// CHECK: +      a = ktx_pf_a[ktx_k];
// CHECK: +      b = ktx_pf_b[ktx_k];
// CHECK: +      for (int j = 0; j < 4; ++j) y[blockIdx.x * n4 * 4 + i * 4 + j] = a.v[j] * b.v[j] * scale;
// CHECK: +    }
// CHECK: +  }
// CHECK: +  for (int i = threadIdx.x + KTX_PREFETCH * blockDim.x; i < n4; i += blockDim.x) {
// CHECK: +    F4 a, b;
// CHECK: +    a.load(row + i * 4);
// CHECK: +    b.load(w + i * 4);
// CHECK: +    for (int j = 0; j < 4; ++j) y[blockIdx.x * n4 * 4 + i * 4 + j] = a.v[j] * b.v[j] * scale;
// CHECK: +  }
// CHECK: +#else
// CHECK: +#endif
// CONFIG: +// ktx: `early-loads` instantiated with PREFETCH=2
// CONFIG: -  for (int i = threadIdx.x; i < n4; i += blockDim.x) {
// CONFIG: +  // early-loads: loop L4 takes these packs from here, not from memory
// CONFIG: +  F4 ktx_pf_a[2];
// CONFIG: +#pragma unroll
// CONFIG: +  for (int ktx_k = 0; ktx_k < 2; ++ktx_k) {
// CONFIG: +    const int i = threadIdx.x + ktx_k * blockDim.x;
// CONFIG: +    if (i < n4) {
// CONFIG: +      F4 a;
// CONFIG: +      a.load(row + i * 4); ktx_pf_a[ktx_k] = a;
// CONFIG: +      for (int j = 0; j < 4; ++j) s += a.v[j] * a.v[j];
// CONFIG: +    }
// CONFIG: +  }
// CONFIG: +  for (int i = threadIdx.x + 2 * blockDim.x; i < n4; i += blockDim.x) {
// CONFIG: -  for (int i = threadIdx.x; i < n4; i += blockDim.x) {
// CONFIG: +#pragma unroll
// CONFIG: +  for (int ktx_k = 0; ktx_k < 2; ++ktx_k) {
// CONFIG: +    const int i = threadIdx.x + ktx_k * blockDim.x;
// CONFIG: +    if (i < n4) {
// CONFIG: +      F4 a, b;
// CONFIG: +      a = ktx_pf_a[ktx_k];
// CONFIG: +      b = ktx_pf_b[ktx_k];
// CONFIG: +      for (int j = 0; j < 4; ++j) y[blockIdx.x * n4 * 4 + i * 4 + j] = a.v[j] * b.v[j] * scale;
// CONFIG: +    }
// CONFIG: +  }
// CONFIG: +  for (int i = threadIdx.x + 2 * blockDim.x; i < n4; i += blockDim.x) {
