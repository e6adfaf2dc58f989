// RUN: not ktx apply --passes block-size,unrol %s 2>&1 | filecheck %s --match-full-lines
// RUN: not ktx apply --passes tile{size=4} %s 2>&1 | filecheck %s --match-full-lines --check-prefix=OPTION
__global__ void k(float* x) { x[threadIdx.x] = 0.f; }

// CHECK: ktx: error: unknown pass 'unrol' (did you mean 'unroll'? passes: block-size, {{.*}}coarsen, {{.*}}expose, {{.*}}launch-bounds, {{.*}}split, tile, unroll{{.*}})
// OPTION: ktx: error: pass 'tile' has no option 'size' (options: sizes (ints, default 2|4|8): tile sizes offered (1, the original, is always added); loops (strs, default ): loops to tile (L0|L2); default: the kernel's outermost loops; unroll (bool, default true): fully unroll the loop within a tile (#pragma unroll))
