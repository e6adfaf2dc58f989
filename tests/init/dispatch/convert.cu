#include <cuda_fp16.h>

template <typename S, typename D>
__global__ void convert_k(D* y, const S* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = D(float(x[i]));
}

template <typename S, typename D>
static void convert_cuda(const S* x, D* y, int n) {
  convert_k<<<(n + 255) / 256, 256>>>(y, x, n);
}

template <typename D>
static void convert_switch(const void* x, int src_type, D* y, int n) {
  if (src_type == 1) {
    convert_cuda((const half*)x, y, n);
  } else {
    convert_cuda((const float*)x, y, n);
  }
}

void convert(const void* x, int src_type, void* y, int n) {
  convert_switch(x, src_type, (float*)y, n);
}
