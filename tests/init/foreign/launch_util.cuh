// A project's launch helpers, in a header of their own (exllamav2's util.cuh keeps DIVIDE there).
#pragma once
#define DIVIDE(x, size) (((x) + (size) - 1) / (size))
