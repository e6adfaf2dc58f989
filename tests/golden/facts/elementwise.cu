// RUN: ktx inspect --facts %s | filecheck %s --match-full-lines
// One element per thread behind an if guard; a #define the launch passes as the block is blockDim;
// __ldg is a load, __stcs a store (the one classifier); restrict gives each pointer its own class.
#define BLOCK 256
__global__ void scale(float* __restrict__ y, const float* __restrict__ x, float* z, float a, int n) {
  int i = blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) {
    y[i] = a * __ldg(&x[i]);
    __stcs(&z[i], 1.f);
  }
}

void go(float* y, const float* x, float* z, int n) {
  scale<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(y, x, z, 2.f, n);
}

// CHECK: kernel scale (line 5)
// CHECK:   launch: line 14 <<<(n + BLOCK - 1) / BLOCK, BLOCK>>>
// CHECK:   block alias: BLOCK is blockDim.x (define = 256)
// CHECK:   element: i = blockDim.x*blockIdx.x + threadIdx.x (int), guard if i < n (line 7)
// CHECK:   ref line 8: store y[i] root y index blockDim.x*blockIdx.x + threadIdx.x elt float 4B conditional alias restrict:y
// CHECK:   ref line 8: load __ldg(&x[i]) root x index blockDim.x*blockIdx.x + threadIdx.x elt float 4B via __ldg conditional alias restrict:x
// CHECK:   ref line 9: store __stcs(&z[i], 1.f) root z index blockDim.x*blockIdx.x + threadIdx.x elt float 4B via __stcs conditional alias global
// CHECK:   pack element: no, the body stores z[i] through __stcs (line 9): packs would drop the __stcs hint (run cache-hints after vectorize instead)
