// RUN: not ktx apply --passes unroll %s --config UNROLL_L0=3 -q 2>&1 | filecheck %s --match-full-lines
// RUN: not ktx apply --passes split,coarsen %s -q 2>&1 | filecheck %s --match-full-lines --check-prefix=CONFLICT
__global__ void k(float* x, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] = 0.f;
}

// CHECK: ktx: error: {{.*}}: 3 is not a value of knob UNROLL_L0 (UNROLL_L0 takes {0, 1, 2, 4, 8}; unroll factor of loop L0 (0: no pragma))
// CONFLICT: ktx: error: passes 'split' and 'coarsen' conflict (split declares conflicts=['coarsen']; drop one of them)
