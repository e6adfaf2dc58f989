// RUN: ktx apply --passes coarsen %s --diff 2>&1 | filecheck %s --match-full-lines
// RUN: ktx apply --passes coarsen %s --config COARSEN=4 --diff -q | filecheck %s --match-full-lines --check-prefix=CONFIG
// One item per thread: the rest of the kernel loops over COARSEN items; return becomes continue.
__global__ void scale_pairs(float2* x, float a, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float2 v = x[i];
  v.x *= a;
  v.y *= a;
  x[i] = v;
}

void launch_scale_pairs(float2* x, float a, int n) {
  dim3 grid((n + 127) / 128);
  scale_pairs<<<grid, 128>>>(x, a, n);
}

// CHECK: {{.*}}: remark: [coarsen] scale_pairs: rewritten: exposed COARSEN {1, 2, 4, 8}
// CHECK: +// ktx:knobs begin
// CHECK: +// scale_pairs templated by `coarsen`.
// CHECK: +// Each KTX_ macro is a knob; the defaults reproduce the original. Pick other values with
// CHECK: +// `ktx apply --config NAME=VALUE` (clean code) or -DKTX_NAME=VALUE.
// CHECK: +#ifndef KTX_COARSEN
// CHECK: +#define KTX_COARSEN 1  // coarsen: items per thread (the grid's x is divided by it)
// CHECK: +#endif
// CHECK: +#ifndef KTX_CDIV
// CHECK: +#define KTX_CDIV(a, b) (((a) + (b) - 1) / (b))
// CHECK: +#endif
// CHECK: +// ktx:knobs end
// CHECK: -  const int i = blockIdx.x * blockDim.x + threadIdx.x;
// CHECK: -  if (i >= n) return;
// CHECK: -  float2 v = x[i];
// CHECK: -  v.x *= a;
// CHECK: -  v.y *= a;
// CHECK: -  x[i] = v;
// CHECK: +#pragma unroll
// CHECK: +  for (int ktx_k = 0; ktx_k < KTX_COARSEN; ++ktx_k) {
// CHECK: +    const int i = (blockIdx.x * KTX_COARSEN + ktx_k) * blockDim.x + threadIdx.x;
// CHECK: +    if (i >= n) continue;
// CHECK: +    float2 v = x[i];
// CHECK: +    v.x *= a;
// CHECK: +    v.y *= a;
// CHECK: +    x[i] = v;
// CHECK: +  }
// CHECK: -  dim3 grid((n + 127) / 128);
// CHECK: +  dim3 grid(KTX_CDIV((n + 127) / 128, KTX_COARSEN));
// CONFIG: +// ktx: `coarsen` instantiated with COARSEN=4
// CONFIG: -  const int i = blockIdx.x * blockDim.x + threadIdx.x;
// CONFIG: -  if (i >= n) return;
// CONFIG: -  float2 v = x[i];
// CONFIG: -  v.x *= a;
// CONFIG: -  v.y *= a;
// CONFIG: -  x[i] = v;
// CONFIG: +#pragma unroll
// CONFIG: +  for (int ktx_k = 0; ktx_k < 4; ++ktx_k) {
// CONFIG: +    const int i = (blockIdx.x * 4 + ktx_k) * blockDim.x + threadIdx.x;
// CONFIG: +    if (i >= n) continue;
// CONFIG: +    float2 v = x[i];
// CONFIG: +    v.x *= a;
// CONFIG: +    v.y *= a;
// CONFIG: +    x[i] = v;
// CONFIG: +  }
// CONFIG: -  dim3 grid((n + 127) / 128);
// CONFIG: +  dim3 grid(((n + 127) / 128 + 3) / 4);
