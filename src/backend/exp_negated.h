// exp(-x) over an array of doubles: the softmax terms exp((v - max) / T) of
// the sampler, 4-8x faster than calling std::exp per element.
//
// Layout: x and y hold n contiguous doubles; y may be x (in place).
// Accuracy: within 2 ulp of the exact value for x in [-700, 708]; x > 708
// (results below 2^-1021) and x = +inf give 0; x must not be NaN (callers
// map it away first). Every element is computed by the
// same operations wherever it sits in the array (the AVX2 tail is a masked
// vector, not a scalar loop), so a value's result never depends on n.
// The Scalar and Avx2 (also used for Avx512) variants may differ in the
// last bit: Avx2 fuses the multiply-adds.
// In the backend layer's interface so that the sampler (engine/) and the CPU
// kernels may both use it; it runs the CPU kernels' variant.
#pragma once

#include <cstddef>

namespace pagellm {

namespace cpu {
enum class CpuIsa;  // backend/cpu/cpu_isa.h
}

void exp_negated(const double* x, double* y, size_t n);  // cpu::best_isa()
void exp_negated(const double* x, double* y, size_t n, cpu::CpuIsa isa);

}  // namespace pagellm
