// RUN: ktx apply --passes expose %s --diff 2>&1 | filecheck %s --match-full-lines
// A template int set at the launch (and the launch literals equal to it), a #define loop bound,
// and a launcher constexpr become knobs named after themselves.
#define ITEMS 4

template <typename T, int NUM_THREADS>
__global__ void __launch_bounds__(NUM_THREADS) zero(T* x, int n) {
  for (int i = blockIdx.x * NUM_THREADS + threadIdx.x; i < n; i += gridDim.x * NUM_THREADS) {
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) x[i * ITEMS + j] = T(0);
  }
}

void launch_zero(float* x, int n) {
  constexpr int kMaxBlocks = 1024;
  zero<float, 256><<<std::min((n + 255) / 256, kMaxBlocks), 256>>>(x, n);
}

// CHECK: {{.*}}: remark: [expose] NUM_THREADS: rewritten: exposed NUM_THREADS {64, 128, 256, 512, 1024}; the launch's literal 256 (line 16, line 16) follows NUM_THREADS
// CHECK: {{.*}}: remark: [expose] ITEMS: rewritten: exposed ITEMS {1, 2, 4, 8, 16}
// CHECK: {{.*}}: remark: [expose] MAX_BLOCKS: rewritten: exposed MAX_BLOCKS {256, 512, 1024, 2048, 4096}
// CHECK: {{.*}}: remark: [expose] BLOCK: skipped: 256 follows the kernel's template parameter of that value
// CHECK: -#define ITEMS 4
// CHECK: +// ktx:knobs begin
// CHECK: +// zero templated by `expose`.
// CHECK: +// Each KTX_ macro is a knob; the defaults reproduce the original. Pick other values with
// CHECK: +// `ktx apply --config NAME=VALUE` (clean code) or -DKTX_NAME=VALUE.
// CHECK: +#ifndef KTX_NUM_THREADS
// CHECK: +#define KTX_NUM_THREADS 256  // expose: template parameter NUM_THREADS (was 256)
// CHECK: +#endif
// CHECK: +#ifndef KTX_ITEMS
// CHECK: +#define KTX_ITEMS 4  // expose: #define ITEMS (was 4)
// CHECK: +#endif
// CHECK: +#ifndef KTX_MAX_BLOCKS
// CHECK: +#define KTX_MAX_BLOCKS 1024  // expose: constexpr kMaxBlocks (was 1024)
// CHECK: +#endif
// CHECK: +// ktx:knobs end
// CHECK: +#define ITEMS KTX_ITEMS
// CHECK: -  constexpr int kMaxBlocks = 1024;
// CHECK: -  zero<float, 256><<<std::min((n + 255) / 256, kMaxBlocks), 256>>>(x, n);
// CHECK: +  constexpr int kMaxBlocks = KTX_MAX_BLOCKS;
// CHECK: +  zero<float, KTX_NUM_THREADS><<<std::min((n + 255) / KTX_NUM_THREADS, kMaxBlocks), KTX_NUM_THREADS>>>(x, n);
// CHECK:  // CHECK: {{[{][{]}}.*}}: remark: [expose] NUM_THREADS: rewritten: exposed NUM_THREADS {64, 128, 256, 512, 1024}; the launch's literal 256 (line 16, line 16) follows NUM_THREADS
