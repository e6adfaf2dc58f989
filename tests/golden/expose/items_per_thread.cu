// RUN: ktx apply --passes expose %s --diff 2>&1 | filecheck %s --match-full-lines
// RUN: ktx apply --passes expose %s --knobs 2>&1 | filecheck %s --match-full-lines --check-prefix=KNOBS
// Items per thread as a constexpr the kernel loops over and the launcher divides the grid by:
// kItems becomes the knob ITEMS, in the kernel and the grid at once (one definition), and the
// launcher constexpr threads (the block) becomes THREADS; the static_assert narrows ITEMS to {2, 4, 8}.
constexpr int kItems = 4;
static_assert(kItems >= 2 && kItems <= 8, "two to eight items per thread");

__global__ void scale(float* __restrict__ y, const float* __restrict__ x, float a, int n) {
  const int base = blockIdx.x * blockDim.x * kItems + threadIdx.x;
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const int i = base + k * blockDim.x;
    if (i < n) y[i] = a * x[i];
  }
}

void launch(float* y, const float* x, float a, int n) {
  const int threads = 256;
  scale<<<(n + threads * kItems - 1) / (threads * kItems), threads>>>(y, x, a, n);
}

// CHECK: {{.*}}: remark: [expose] ITEMS: rewritten: exposed ITEMS {2, 4, 8}; the kernel's static_assert limits ITEMS to {2, 4, 8}; launch mapping: 4 -> ITEMS in grid[0]
// CHECK: {{.*}}: remark: [expose] THREADS: rewritten: exposed THREADS {64, 128, 256, 512, 1024}
// CHECK: -constexpr int kItems = 4;
// CHECK: +// ktx:knobs begin
// CHECK: +// scale templated by `expose`.
// CHECK: +// Each KTX_ macro is a knob; the defaults reproduce the original. Pick other values with
// CHECK: +// `ktx apply --config NAME=VALUE` (clean code) or -DKTX_NAME=VALUE.
// CHECK: +#ifndef KTX_ITEMS
// CHECK: +#define KTX_ITEMS 4  // expose: constexpr kItems (was 4)
// CHECK: +#endif
// CHECK: +#ifndef KTX_THREADS
// CHECK: +#define KTX_THREADS 256  // expose: constexpr threads (was 256)
// CHECK: +#endif
// CHECK: +// ktx:knobs end
// CHECK: +constexpr int kItems = KTX_ITEMS;
// CHECK: -  const int threads = 256;
// CHECK: +  const int threads = KTX_THREADS;
// KNOBS: {{.*}}: remark: [expose] ITEMS: rewritten: exposed ITEMS {2, 4, 8}; the kernel's static_assert limits ITEMS to {2, 4, 8}; launch mapping: 4 -> ITEMS in grid[0]
// KNOBS: {{.*}}: remark: [expose] THREADS: rewritten: exposed THREADS {64, 128, 256, 512, 1024}
// KNOBS: {
// KNOBS:   "kernel": "scale",
// KNOBS:   "pipeline": "expose",
// KNOBS:   "knobs": [
// KNOBS:     {"name": "ITEMS", "values": [2, 4, 8], "default": 4, "help": "constexpr kItems (was 4)", "pass": "expose", "site": "ITEMS"},
// KNOBS:     {"name": "THREADS", "values": [64, 128, 256, 512, 1024], "default": 256, "help": "constexpr threads (was 256)", "pass": "expose", "site": "THREADS"}
// KNOBS:   ],
// KNOBS:   "constraints": [],
// KNOBS:   "launch": {"grid": ["(n + THREADS * ITEMS - 1) // (THREADS * ITEMS)"], "block": ["THREADS"], "shared": "0"},
// KNOBS:   "name_expression": "scale",
// KNOBS:   "template_args": []
// KNOBS: }
