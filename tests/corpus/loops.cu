// CORPUS: loop shapes: grid-stride for, for with assignment init, for with no init, comma
// step, while, do-while, range-for over an array, nested loops four deep with their parents,
// a loop whose body is a single statement, and an infinite for(;;) with break.
// EXPECT: kernels=grid_stride,shapes loops=11 launches=1 warnings=0 errors=0
// EXPECT: kinds=for,for,for,for,while,do,range-for,for,for,for,for
// EXPECT: vars=i,i,j,-,-,-,v,a,b,c,d depths=0,0,0,0,0,0,0,0,1,2,3 parents=-,-,-,-,-,-,-,-,7,8,9
__global__ void grid_stride(float* __restrict__ y, const float* __restrict__ x, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)blockDim.x * gridDim.x) {
    y[i] = 2.f * x[i];
  }
}

__global__ void shapes(int* out, int n) {
  int i;
  for (i = threadIdx.x; i < n; i += blockDim.x) out[i] = 0;
  int j = 0, k = n;
  for (; j < k; ++j, --k) out[j] += out[k];
  for (;;) {
    if (out[0] > 0) break;
    out[0]++;
  }
  int w = 0;
  while (w < n && out[w] == 0) {
    ++w;
  }
  do {
    --w;
  } while (w > 0);
  int vals[4] = {1, 2, 3, 4};
  for (int v : vals) out[v] += v;
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 2; ++b) {
      for (int c = 0; c < 2; ++c) {
        for (int d = 0; d < 2; ++d) out[a * 8 + b * 4 + c * 2 + d] += 1;
      }
    }
}

void launch(float* y, const float* x, size_t n) {
  const int threads = 256;
  const int blocks = static_cast<int>((n + threads - 1) / threads);
  grid_stride<<<blocks < 1024 ? blocks : 1024, threads>>>(y, x, n);
}
