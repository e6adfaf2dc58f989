// ktx corpus sweep stub: cuRAND's host header (see curand_kernel.h).
#pragma once
#include "curand_kernel.h"
typedef struct curandGenerator_st* curandGenerator_t;
typedef enum curandStatus { CURAND_STATUS_SUCCESS = 0 } curandStatus_t;
