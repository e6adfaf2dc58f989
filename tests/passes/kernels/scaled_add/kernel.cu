// scaled_add: a test kernel for the semantic passes (not part of the suite).
//
//   out[i] = x[i] * expf(-1 / temp) + y[i] / sqrtf(var + eps)        i < n, fp32
//
// A grid-stride loop over a flat array whose length n need not be a multiple of any pack: with
// separate base pointers (always aligned), vectorize's packed loop and its scalar tail both run
// for odd n. The two factors are loop-invariant (hoist), the math has fast variants (fast-math),
// x and y are read-only and out is write-only (cache-hints).

__global__ void scaled_add_kernel(float* __restrict__ out, const float* __restrict__ x,
                                  const float* __restrict__ y, const float var, const float eps,
                                  const float temp, const int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    out[i] = x[i] * expf(-1.0f / temp) + y[i] / sqrtf(var + eps);
  }
}

#ifndef __CUDACC_RTC__
void launch_scaled_add(float* out, const float* x, const float* y, float var, float eps, float temp,
                       int n) {
  const int blocks = (n + 255) / 256 < 1024 ? (n + 255) / 256 : 1024;
  scaled_add_kernel<<<blocks, 256>>>(out, x, y, var, eps, temp, n);
}
#endif
