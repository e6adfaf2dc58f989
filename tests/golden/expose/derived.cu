// RUN: ktx apply --passes expose %s --diff 2>&1 | filecheck %s --match-full-lines
// A constant computed from another (NUM_WARPS = THREADS / 32) follows it: no knob of its own.
constexpr int THREADS = 256;
constexpr int NUM_WARPS = THREADS / 32;

__global__ void sum(float* out, const float* in, int n) {
  __shared__ float part[NUM_WARPS];
  float acc = 0.f;
  for (int i = threadIdx.x; i < n; i += THREADS) acc += in[blockIdx.x * n + i];
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffff, acc, o);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = 0.f;
    for (int w = 0; w < NUM_WARPS; ++w) t += part[w];
    out[blockIdx.x] = t;
  }
}

void launch(float* out, const float* in, int rows, int n) { sum<<<rows, THREADS>>>(out, in, n); }

// CHECK: {{.*}}: remark: [expose] THREADS: rewritten: exposed THREADS {64, 128, 256, 512, 1024}; launch mapping: 256 -> THREADS in block[0]
// CHECK: {{.*}}: remark: [expose] NUM_WARPS: skipped: NUM_WARPS is computed from THREADS (THREADS / 32): it follows THREADS, so it is no knob of its own (expose THREADS instead)
// CHECK: -constexpr int THREADS = 256;
// CHECK: +// ktx:knobs begin
// CHECK: +// sum templated by `expose`.
// CHECK: +// Each KTX_ macro is a knob; the defaults reproduce the original. Pick other values with
// CHECK: +// `ktx apply --config NAME=VALUE` (clean code) or -DKTX_NAME=VALUE.
// CHECK: +#ifndef KTX_THREADS
// CHECK: +#define KTX_THREADS 256  // expose: constexpr THREADS (was 256)
// CHECK: +#endif
// CHECK: +// ktx:knobs end
// CHECK: +constexpr int THREADS = KTX_THREADS;
