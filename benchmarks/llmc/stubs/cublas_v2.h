// ktx llm.c benchmark: the cuBLAS declarations that llm.c's dev/cuda/common.h names in host code.
// The kernels under test never call cuBLAS and ktx compiles them with `nvcc -cubin`, which parses
// host code but links nothing; these declarations stand in where the cuBLAS headers are absent
// (and, found first on the include path, everywhere, so every host compiles the same text).
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>
typedef enum { CUBLAS_STATUS_SUCCESS = 0 } cublasStatus_t;
typedef enum { CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32F_FAST_TF32 = 77 } cublasComputeType_t;
typedef enum { CUBLAS_DEFAULT_MATH = 0, CUBLAS_TF32_TENSOR_OP_MATH = 3 } cublasMath_t;
typedef struct ktxStubCublasContext* cublasHandle_t;
cublasStatus_t cublasCreate(cublasHandle_t* handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode);
