// CORPUS: a syntax error inside a kernel (an error naming that kernel, which is still
// indexed), garbage at file scope between kernels (a warning), and kernels before and after
// both that must be indexed normally, with their loops and the launch below.
// EXPECT: kernels=before_ok,broken,after_ok loops=3 launches=1 launch_kernels=after_ok
// EXPECT: errors=1 warnings=1 error_in=broken
__global__ void before_ok(float* x, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] = 0.f;
}

__global__ void broken(float* x, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    x[i] = x[i] * * 2.f +;
  }
}

this is not C++ at all @@

__global__ void after_ok(float* x, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] = 1.f;
}

void launch(float* x, int n) { after_ok<<<1, 128>>>(x, n); }
