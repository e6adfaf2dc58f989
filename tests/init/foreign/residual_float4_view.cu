// A residual add over float4 views of its arrays: the subscripts are the views' (i < n / 4),
// each element of a view four of the array's; the bias view wraps around a row (i % row4).
__global__ void residual_add_f4(float* out, const float* x, const float* bias, int n, int row4) {
    const float4* xv = reinterpret_cast<const float4*>(x);
    const float4* bv = reinterpret_cast<const float4*>(bias);
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n / 4) {
        float4 a = xv[i];
        const float4 c = bv[i % row4];
        a.x += c.x; a.y += c.y; a.z += c.z; a.w += c.w;
        reinterpret_cast<float4*>(out)[i] = a;
    }
}

void residual_add(float* out, const float* x, const float* bias, int rows, int cols, cudaStream_t s) {
    const int n = rows * cols;
    residual_add_f4<<<(n / 4 + 255) / 256, 256, 0, s>>>(out, x, bias, n, cols / 4);
}
