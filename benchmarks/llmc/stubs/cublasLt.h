// ktx llm.c benchmark: cublasLt handle declarations for common.h's host code (see cublas_v2.h).
#pragma once
#include "cublas_v2.h"
typedef struct ktxStubCublasLtContext* cublasLtHandle_t;
cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle);
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle);
