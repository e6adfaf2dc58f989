// A project's launch helpers, in a header of their own (exllamav2's util.cuh keeps DIVIDE there).
#pragma once
#define DIVIDE(x, size) (((x) + (size) - 1) / (size))
// A block size spelled as an expression of other macros (cuda-samples' histogram_common.h).
#define LOG2_WARP_LANES 5U
#define WARP_LANES (1U << LOG2_WARP_LANES)
#define WARP_COUNT 6
#define THREADBLOCK_SIZE (WARP_COUNT * WARP_LANES)
