// ktx corpus sweep stub: cuRAND's host header (see curand_kernel.h).
#pragma once
#include "curand_kernel.h"
typedef struct curandGenerator_st* curandGenerator_t;
typedef enum curandStatus { CURAND_STATUS_SUCCESS = 0 } curandStatus_t;
typedef enum curandRngType { CURAND_RNG_PSEUDO_DEFAULT = 100, CURAND_RNG_PSEUDO_PHILOX4_32_10 = 161 } curandRngType_t;
template <class... A> inline curandStatus_t curandCreateGenerator(A...) { return CURAND_STATUS_SUCCESS; }
template <class... A> inline curandStatus_t curandSetPseudoRandomGeneratorSeed(A...) { return CURAND_STATUS_SUCCESS; }
template <class... A> inline curandStatus_t curandDestroyGenerator(A...) { return CURAND_STATUS_SUCCESS; }
template <class... A> inline curandStatus_t curandGenerateUniform(A...) { return CURAND_STATUS_SUCCESS; }
