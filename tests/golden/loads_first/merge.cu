// RUN: ktx apply --passes loads-first %s --diff 2>&1 | filecheck %s --match-full-lines
// RUN: ktx apply --passes loads-first %s --config LOADS_FIRST=1 --diff -q | filecheck %s --match-full-lines --check-prefix=CONFIG
// Two weighted packs: the weights come from small loads and math; the packs' addresses are known
// before that, so their loads go first and all loads are in flight together.
struct alignas(16) F4 {
  float v[4];
  __device__ void load(const float* p) { *reinterpret_cast<float4*>(v) = *reinterpret_cast<const float4*>(p); }
};

__global__ void blend(float* __restrict__ out, const float* __restrict__ a, const float* __restrict__ b,
                      const float* __restrict__ wa, const float* __restrict__ wb, int n4) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n4) return;
  const int row = i / 32;
  const float ea = expf(wa[row]);
  const float eb = expf(wb[row]);
  if (ea + eb == 0.f) return;
  const float sa = ea / (ea + eb);
  F4 x, y;
  x.load(a + i * 4);
  y.load(b + i * 4);
  for (int j = 0; j < 4; ++j) out[i * 4 + j] = x.v[j] * sa + y.v[j] * (1.f - sa);
}

void launch_blend(float* out, const float* a, const float* b, const float* wa, const float* wb, int n4) {
  blend<<<(n4 + 127) / 128, 128>>>(out, a, b, wa, wb, n4);
}

// CHECK: {{.*}}: remark: [loads-first] blend: rewritten: exposed LOADS_FIRST {0, 1}; loads of a, b issued first
// CHECK: +// ktx:knobs begin
// CHECK: +// blend templated by `loads-first`.
// CHECK: +// Each KTX_ macro is a knob; the defaults reproduce the original. Pick other values with
// CHECK: +// `ktx apply --config NAME=VALUE` (clean code) or -DKTX_NAME=VALUE.
// CHECK: +#ifndef KTX_LOADS_FIRST
// CHECK: +#define KTX_LOADS_FIRST 0  // loads-first: 1: straight-line loads issued as soon as their address is known
// CHECK: +#endif
// CHECK: +// ktx:knobs end
// CHECK: +#if KTX_LOADS_FIRST
// CHECK: +  // loads-first: issued as soon as the address is known
// CHECK: +  F4 ktx_early_x;
// CHECK: +  ktx_early_x.load(a + i * 4);
// CHECK: +  F4 ktx_early_y;
// CHECK: +  ktx_early_y.load(b + i * 4);
// CHECK: +#endif
// CHECK: +#if KTX_LOADS_FIRST
// CHECK: +  x = ktx_early_x;
// CHECK: +#else
// CHECK: +#endif
// CHECK: +#if KTX_LOADS_FIRST
// CHECK: +  y = ktx_early_y;
// CHECK: +#else
// CHECK: +#endif
// CONFIG: +// ktx: `loads-first` instantiated with LOADS_FIRST=1
// CONFIG: +  // loads-first: issued as soon as the address is known
// CONFIG: +  F4 ktx_early_x;
// CONFIG: +  ktx_early_x.load(a + i * 4);
// CONFIG: +  F4 ktx_early_y;
// CONFIG: +  ktx_early_y.load(b + i * 4);
// CONFIG: -  x.load(a + i * 4);
// CONFIG: -  y.load(b + i * 4);
// CONFIG: +  x = ktx_early_x;
// CONFIG: +  y = ktx_early_y;
