// ktx corpus sweep stub: cuBLASLt's names (see cublas_v2.h).
#pragma once
#include "cublas_v2.h"
typedef struct cublasLtContext* cublasLtHandle_t;
typedef struct cublasLtMatmulDescOpaque_t* cublasLtMatmulDesc_t;
typedef struct cublasLtMatrixLayoutOpaque_t* cublasLtMatrixLayout_t;
typedef struct cublasLtMatmulPreferenceOpaque_t* cublasLtMatmulPreference_t;
typedef struct { int algo[16]; } cublasLtMatmulAlgo_t;
typedef struct { cublasLtMatmulAlgo_t algo; size_t workspaceSize; cublasStatus_t state; float wavesCount; int reserved[4]; }
    cublasLtMatmulHeuristicResult_t;
typedef enum { CUBLASLT_MATMUL_DESC_TRANSA = 3, CUBLASLT_MATMUL_DESC_TRANSB = 4, CUBLASLT_MATMUL_DESC_POINTER_MODE = 2,
               CUBLASLT_MATMUL_DESC_EPILOGUE = 7, CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8 } cublasLtMatmulDescAttributes_t;
typedef enum { CUBLASLT_ORDER_COL = 0, CUBLASLT_ORDER_ROW = 1, CUBLASLT_ORDER_COL32 = 2 } cublasLtOrder_t;
typedef enum { CUBLASLT_POINTER_MODE_HOST = 0, CUBLASLT_POINTER_MODE_DEVICE = 1,
               CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_ZERO = 4 } cublasLtPointerMode_t;
typedef enum { CUBLASLT_MATRIX_LAYOUT_ORDER = 1 } cublasLtMatrixLayoutAttribute_t;
typedef enum { CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1 } cublasLtMatmulPreferenceAttributes_t;
typedef enum { CUBLASLT_EPILOGUE_DEFAULT = 1, CUBLASLT_EPILOGUE_BIAS = 4, CUBLASLT_EPILOGUE_GELU = 32 } cublasLtEpilogue_t;
KTX_STUB_CUBLAS_FN(cublasLtCreate)
KTX_STUB_CUBLAS_FN(cublasLtDestroy)
KTX_STUB_CUBLAS_FN(cublasLtMatmulDescCreate)
KTX_STUB_CUBLAS_FN(cublasLtMatmulDescDestroy)
KTX_STUB_CUBLAS_FN(cublasLtMatmulDescSetAttribute)
KTX_STUB_CUBLAS_FN(cublasLtMatrixLayoutCreate)
KTX_STUB_CUBLAS_FN(cublasLtMatrixLayoutDestroy)
KTX_STUB_CUBLAS_FN(cublasLtMatrixLayoutSetAttribute)
KTX_STUB_CUBLAS_FN(cublasLtMatmulPreferenceCreate)
KTX_STUB_CUBLAS_FN(cublasLtMatmulPreferenceDestroy)
KTX_STUB_CUBLAS_FN(cublasLtMatmulPreferenceSetAttribute)
KTX_STUB_CUBLAS_FN(cublasLtMatmulAlgoGetHeuristic)
KTX_STUB_CUBLAS_FN(cublasLtMatmul)
