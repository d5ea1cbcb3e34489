// cuBLAS, loaded on first use with dlopen instead of linked: libcublas pulls
// in libcublasLt, and merely loading the two at start-up makes ~200 MiB of
// every pagellm process resident, GPU or not (relocated data). Only a process
// that runs layers on a GPU pays that, once it creates a CUDA backend.
//
// The entry points keep cuBLAS's own signatures (opaque here: the .cpp/.cu
// files that call them include <cublas_v2.h>).
#pragma once

namespace pagellm::cuda {

struct CublasApi;

// Loads libcublas.so.<major of the headers> (then libcublas.so) and resolves
// the entry points, once; throws CudaError naming the library or symbol.
const CublasApi& cublas_api();

}  // namespace pagellm::cuda
