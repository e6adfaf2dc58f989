// ktx corpus sweep stub (see curand_kernel.h).
#pragma once
#include "curand_kernel.h"
