// The resolved cuBLAS entry points (backend/cuda/cublas_api.h), for files that
// include <cublas_v2.h>.
#pragma once

#include <cublas_v2.h>

#include "backend/cuda/cublas_api.h"

namespace pagellm::cuda {

struct CublasApi {
  decltype(&cublasCreate_v2) create;
  decltype(&cublasDestroy_v2) destroy;
  decltype(&cublasSetStream_v2) set_stream;
  // The C entry point (C++ also sees an inline overload of this name).
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                            const void*, const void*, cudaDataType, int, const void*, cudaDataType,
                            int, const void*, void*, cudaDataType, int, cublasComputeType_t,
                            cublasGemmAlgo_t);
  decltype(&cublasSgemm_v2) sgemm;
  decltype(&cublasGetStatusName) status_name;
  decltype(&cublasGetStatusString) status_string;
};

}  // namespace pagellm::cuda
