// RUN: ktx apply --passes vectorize %s --kernel shift --diff 2>&1 | filecheck %s --match-full-lines --check-prefix=SHIFT
// RUN: ktx apply --passes vectorize %s --kernel encoder --diff 2>&1 | filecheck %s --match-full-lines --check-prefix=ENCODER
// RUN: ktx apply --passes vectorize %s --kernel two_outputs --diff 2>&1 | filecheck %s --match-full-lines --check-prefix=OUTPUTS
// RUN: ktx apply --passes vectorize %s --kernel lane_bias --diff 2>&1 | filecheck %s --match-full-lines --check-prefix=LANE
// RUN: ktx apply --passes vectorize %s --kernel counted --diff 2>&1 | filecheck %s --match-full-lines --check-prefix=COUNTED
// RUN: ktx apply --passes vectorize %s --kernel clamp_tail --diff 2>&1 | filecheck %s --match-full-lines --check-prefix=GUARD
// Negative: one-element-per-thread kernels that vectorize refuses, each with the construct and line.

// A cross-element dependence through one pointer: a pack of out would be read before the
// neighbouring element's store (out[i] = in[i + 1] is packed behind a per-pack disjoint check).
__global__ void shift(float* out, const float* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n - 1) out[i] = out[i + 1] - in[i];
}

// llm.c's encoder_forward_kernel2 shape: the index is split into (b, t, c) with idx / C and
// idx % C, and the store goes through a pointer built from them.
__global__ void encoder(float* out, const int* inp, const float* wte, const float* wpe, int B, int T, int C) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  int N = B * T * C;
  if (idx < N) {
    int bt = idx / C;
    int b = bt / T;
    int t = bt % T;
    int c = idx % C;
    int ix = inp[b * T + t];
    float* out_btc = out + b * T * C + t * C + c;
    *out_btc = wte[ix * C + c] + wpe[t * C + c];
  }
}

// Two outputs that may alias (no __restrict__), written one after the other and read back.
__global__ void two_outputs(float* a, float* b, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    a[i] = x[i] * 2.f;
    b[i] = a[i] + x[i];
  }
}

// A value derived from threadIdx.x belongs to the thread, not to the element.
__global__ void lane_bias(float* __restrict__ out, const float* __restrict__ in, const float* __restrict__ bias, int n) {
  const int lane = threadIdx.x % 32;
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] + bias[lane];
}

// Work before the index would run once per (fewer) thread.
__global__ void counted(float* __restrict__ out, const float* __restrict__ in, int* __restrict__ calls, int n) {
  if (threadIdx.x == 0) atomicAdd(calls, 1);
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i];
}

// The guard is not `i < n`.
__global__ void clamp_tail(float* __restrict__ out, const float* __restrict__ in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && in[i] > 0.f) out[i] = in[i];
}

void launch(float* o, float* o2, const float* x, const int* ids, int* calls, int n) {
  shift<<<(n + 255) / 256, 256>>>(o, x, n);
  encoder<<<(n + 255) / 256, 256>>>(o, ids, x, x, 1, n, 1);
  two_outputs<<<(n + 255) / 256, 256>>>(o, o2, x, n);
  lane_bias<<<(n + 255) / 256, 256>>>(o, x, x, n);
  counted<<<(n + 255) / 256, 256>>>(o, x, calls, n);
  clamp_tail<<<(n + 255) / 256, 256>>>(o, x, n);
}

// SHIFT: {{.*}}: remark: [vectorize] shift: skipped: cross-element dependence: out[i + 1] (line 13) and out[i] (line 13) reach the same memory at different offsets from i
// SHIFT-NOT: {{[-+].*}}
// ENCODER: {{.*}}: remark: [vectorize] encoder: skipped: the body stores through `*out_btc` (line 28), not p[idx + offset]; element idx is split as idx / C, idx % C (line 22)
// ENCODER-NOT: {{[-+].*}}
// OUTPUTS: {{.*}}: remark: [vectorize] two_outputs: skipped: b[i] (line 37) is accessed after a[i] (line 36) is written, and they may alias: a packed store would write last
// OUTPUTS-NOT: {{[-+].*}}
// LANE: {{.*}}: remark: [vectorize] lane_bias: skipped: the body reads lane (line 45), computed from threadIdx.x; with several elements per thread it no longer belongs to element i
// LANE-NOT: {{[-+].*}}
// COUNTED: {{.*}}: remark: [vectorize] counted: skipped: `if (threadIdx.x == 0) atomicAdd(calls, 1);` (line 50) runs before the index `i`: a smaller grid would run it fewer times
// COUNTED-NOT: {{[-+].*}}
// GUARD: {{.*}}: remark: [vectorize] clamp_tail: skipped: `if (i < n && in[i] > 0.f) out[i] = in[i];` (line 58) is not a bound check `if (i < n) {...}` or `if (i >= n) return;`: packs need the bound
// GUARD-NOT: {{[-+].*}}
