// Checked cuBLAS calls: BRIGADE_CUBLAS_CHECK(cublasXxx(...)) throws brigade::Error (OutOfMemoryError for
// CUBLAS_STATUS_ALLOC_FAILED) naming the call, the status and file:line. CUDA translation units only.
#pragma once

#include <cublas_v2.h>

#include "tensor/error.h"

#define BRIGADE_CUBLAS_CHECK(call)                                                                          \
  do {                                                                                                      \
    cublasStatus_t brigade_cublas_status = (call);                                                          \
    if (brigade_cublas_status != CUBLAS_STATUS_SUCCESS) {                                                   \
      if (brigade_cublas_status == CUBLAS_STATUS_ALLOC_FAILED) {                                            \
        BRIGADE_THROW(::brigade::OutOfMemoryError, #call,                                                   \
                      " failed: ", cublasGetStatusString(brigade_cublas_status));                           \
      }                                                                                                     \
      BRIGADE_THROW(::brigade::Error, #call, " failed: ", cublasGetStatusName(brigade_cublas_status), " (", \
                    cublasGetStatusString(brigade_cublas_status), ")");                                     \
    }                                                                                                       \
  } while (0)
