// Runs group_quant_int8 (from the file named by -DKERNEL_FILE) once on buffers of exactly
// tokens * hidden elements, for compute-sanitizer to say whether any access leaves them.
#include <cstdio>
#include <cstdlib>
#include KERNEL_FILE

int main(int argc, char** argv) {
  const int tokens = argc > 1 ? std::atoi(argv[1]) : 1;
  const int hidden = argc > 2 ? std::atoi(argv[2]) : 1536;
  const size_t n = static_cast<size_t>(tokens) * hidden;
  __nv_bfloat16* in = nullptr;
  int8_t* out = nullptr;
  float* scales = nullptr;
  cudaMalloc(&in, n * sizeof(__nv_bfloat16));
  cudaMalloc(&out, n);
  cudaMalloc(&scales, n / 128 * sizeof(float));
  cudaMemset(in, 0, n * sizeof(__nv_bfloat16));
  group_quant_int8(in, out, scales, tokens, hidden);
  const cudaError_t err = cudaDeviceSynchronize();
  std::printf("tokens=%d hidden=%d: %s\n", tokens, hidden, cudaGetErrorString(err));
  cudaFree(in);
  cudaFree(out);
  cudaFree(scales);
  return err == cudaSuccess ? 0 : 1;
}
