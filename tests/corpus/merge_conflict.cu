// CORPUS: a file committed mid-merge (seen in a stored copy of a real serving library):
// conflict markers at file scope and inside a host function. Each marker is a warning, the
// kernel before the first conflict is indexed, and nothing crashes.
// EXPECT: kernels=stable_kernel loops=1 warnings>=6 errors=0
__global__ void stable_kernel(float* x, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] *= 2.f;
}

<<<<<<< HEAD
void launch(float* x, int n, long long stream_handle) {
  cudaStream_t stream = reinterpret_cast<cudaStream_t>(stream_handle);
=======
void launch(float* x, int n) {
  cudaStream_t stream = 0;
>>>>>>> origin/main
  stable_kernel<<<1, 256, 0, stream>>>(x, n);
<<<<<<< HEAD
  (void)n;
=======
>>>>>>> origin/main
}
