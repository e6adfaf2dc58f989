// RUN: ktx apply --passes fast-math %s --config FAST_MATH=3 --diff 2>&1 | filecheck %s --match-full-lines
// Reciprocal-multiply at level 3; the double division and the integer division stay as written.
__global__ void merge(float* __restrict__ out, const float* __restrict__ a_lse, const float* __restrict__ b_lse,
                      double* __restrict__ ratio, int* __restrict__ half, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float m = fmaxf(a_lse[i], b_lse[i]);
  const float pa = expf(a_lse[i] - m);
  const float pb = expf(b_lse[i] - m);
  out[i] = pa / (pa + pb);
  ratio[i] = 1.0 / (double)n;
  half[i] = n / 2;
}

// CHECK: {{.*}}: remark: [fast-math] merge: rewritten: exposed FAST_MATH {0, 1, 2, 3}; 3 statement(s) in merge; verified against the float64 reference
// CHECK: +// ktx: `fast-math` instantiated with FAST_MATH=3
// CHECK: -  const float pa = expf(a_lse[i] - m);
// CHECK: -  const float pb = expf(b_lse[i] - m);
// CHECK: -  out[i] = pa / (pa + pb);
// CHECK: +  const float pa = __expf(a_lse[i] - m);
// CHECK: +  const float pb = __expf(b_lse[i] - m);
// CHECK: +  out[i] = pa * __frcp_rn(pa + pb);
