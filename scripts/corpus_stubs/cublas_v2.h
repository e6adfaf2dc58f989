// ktx corpus sweep stub: the cuBLAS names that extension host code mentions (the toolkit here
// ships no cuBLAS). Declarations only; nothing runs.
#pragma once
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <library_types.h>
typedef struct cublasContext* cublasHandle_t;
typedef enum { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_NOT_INITIALIZED = 1, CUBLAS_STATUS_ALLOC_FAILED = 3,
               CUBLAS_STATUS_INVALID_VALUE = 7, CUBLAS_STATUS_ARCH_MISMATCH = 8, CUBLAS_STATUS_MAPPING_ERROR = 11,
               CUBLAS_STATUS_EXECUTION_FAILED = 13, CUBLAS_STATUS_INTERNAL_ERROR = 14,
               CUBLAS_STATUS_NOT_SUPPORTED = 15, CUBLAS_STATUS_LICENSE_ERROR = 16 } cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 } cublasOperation_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1, CUBLAS_GEMM_DEFAULT_TENSOR_OP = 99, CUBLAS_GEMM_ALGO0 = 0,
               CUBLAS_GEMM_ALGO15_TENSOR_OP = 115 } cublasGemmAlgo_t;
typedef enum { CUBLAS_COMPUTE_16F = 64, CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
               CUBLAS_COMPUTE_32I = 72 } cublasComputeType_t;
typedef enum { CUBLAS_POINTER_MODE_HOST = 0, CUBLAS_POINTER_MODE_DEVICE = 1 } cublasPointerMode_t;
typedef enum { CUBLAS_DEFAULT_MATH = 0, CUBLAS_TENSOR_OP_MATH = 1, CUBLAS_PEDANTIC_MATH = 2,
               CUBLAS_TF32_TENSOR_OP_MATH = 3 } cublasMath_t;
#define KTX_STUB_CUBLAS_FN(name) template <class... A> inline cublasStatus_t name(A...) { return CUBLAS_STATUS_SUCCESS; }
KTX_STUB_CUBLAS_FN(cublasCreate_v2)
KTX_STUB_CUBLAS_FN(cublasCreate)
KTX_STUB_CUBLAS_FN(cublasDestroy)
KTX_STUB_CUBLAS_FN(cublasSetStream)
KTX_STUB_CUBLAS_FN(cublasSetMathMode)
KTX_STUB_CUBLAS_FN(cublasSetPointerMode)
KTX_STUB_CUBLAS_FN(cublasGemmEx)
KTX_STUB_CUBLAS_FN(cublasGemmStridedBatchedEx)
KTX_STUB_CUBLAS_FN(cublasSgemm)
KTX_STUB_CUBLAS_FN(cublasHgemm)
KTX_STUB_CUBLAS_FN(cublasSgemmStridedBatched)
KTX_STUB_CUBLAS_FN(cublasHgemmStridedBatched)
inline const char* cublasGetStatusString(cublasStatus_t) { return "cublas"; }
