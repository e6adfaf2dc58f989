#include <kernels.cuh>

void quantize(const float* a, unsigned char* out, float* absmax, int n) {
  int blocks = (n + 255) / 256;
  quant<float, 256><<<blocks, 256>>>(a, out, absmax, n);
}
