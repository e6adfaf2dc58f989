// RUN: ktx apply --passes online %s --kernel residual_rows --config ONLINE=1 --diff 2>&1 | filecheck %s --match-full-lines
// RUN: ktx apply --passes online %s --kernel shifted_rows --diff 2>&1 | filecheck %s --match-full-lines --check-prefix=SHIFT
// llm.c's fused_residual_forward v2 shape, written anew: the first loop stores the row it sums
// (bf16) and the variance loop reads it back, so Welford folds the stored, rounded element read
// right after its store (iteration j of the first loop writes only index j). The second kernel's
// first loop writes out[j + 1]: the variance loop's reads need not be final, so it is refused.
#include <cuda_bf16.h>
__global__ void residual_rows(__nv_bfloat16* res, float* var, const __nv_bfloat16* a,
                              const __nv_bfloat16* b, int N, int C) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    res += i * C;
    a += i * C;
    b += i * C;
    float m = 0.0f;
    for(int j = 0; j < C; ++j) {
        float out = (float)a[j] + (float)b[j];
        m += out;
        res[j] = (__nv_bfloat16)out;
    }
    m = m / C;
    float v = 0.0f;
    for (int j = 0; j < C; j++) {
        v += ((float)res[j] - m) * ((float)res[j] - m);
    }
    var[i] = v / C;
}

__global__ void shifted_rows(float* out, float* var, const float* a, int N, int C) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    float m = 0.0f;
    for (int j = 0; j < C - 1; j++) {
        m += a[i * C + j];
        out[i * C + j + 1] = a[i * C + j];
    }
    m = m / C;
    float v = 0.0f;
    for (int j = 0; j < C - 1; j++) {
        float d = out[i * C + j] - m;
        v += d * d;
    }
    var[i] = v;
}

// CHECK: {{.*}}: remark: [online] residual_rows: rewritten: exposed ONLINE {0, 1, 2}; m (line 18) and the squared deviations v (line 24) in one pass (Welford)
// CHECK: +// ktx: `online` instantiated with ONLINE=1
// CHECK: +    float v = 0.0f;
// CHECK: +    // online: Welford's count, shift (the first element), mean and squared deviations of
// CHECK: +    // x - shift, for what v sums
// CHECK: +    float ktx_v_n = 0, ktx_v_k = 0, ktx_v_mean = 0, ktx_v_m2 = 0;
// CHECK: +        // online: the element the sum of squares reads, folded into the quadruple
// CHECK: +        const float ktx_x = (float)res[j];
// CHECK: +        ktx_v_k = ktx_v_n > 0 ? ktx_v_k : ktx_x;
// CHECK: +        const float ktx_y = ktx_x - ktx_v_k;
// CHECK: +        ktx_v_n += 1;
// CHECK: +        const float ktx_d = ktx_y - ktx_v_mean;
// CHECK: +        ktx_v_mean += ktx_d / ktx_v_n;
// CHECK: +        ktx_v_m2 += ktx_d * (ktx_y - ktx_v_mean);
// CHECK: -    float v = 0.0f;
// CHECK: -    for (int j = 0; j < C; j++) {
// CHECK: -        v += ((float)res[j] - m) * ((float)res[j] - m);
// CHECK: -    }
// CHECK: +    // online: sum (x - c)^2 = M2 + n (mean - c)^2, c = m as the second loop had it
// CHECK: +    v += ktx_v_m2 + ktx_v_n * ((ktx_v_k - m) + ktx_v_mean) * ((ktx_v_k - m) + ktx_v_mean);
// SHIFT: {{.*}}: remark: [online] shifted_rows: skipped: line 35: the first loop writes memory at an index other than j plus a value fixed over the loop (the second loop's reads may not be final)
// SHIFT-NOT: {{[-+].*}}
