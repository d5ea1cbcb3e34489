// Per-row quantization of activations for the CPU dot products.
//
// Each weight type is multiplied against activations in a "dot type":
//   F32, F16, BF16 weights      -> F32 activations (plain floats, no change)
//   Q4_0, Q5_0, Q8_0, IQ4_NL,
//   MXFP4                       -> Q8_0 activations
//   Q4_1, Q5_1 weights          -> Q8_1 activations
//   Q2_K .. Q6_K, IQ4_XS        -> Q8_K activations
// Block layouts are those of tensor/blocks.h:
//   Q8_0 {f16 d; i8 qs[32]}                  x ~= d * q
//   Q8_1 {f16 d, s; i8 qs[32]}               x ~= d * q, s = d * sum(q) (as f16)
//   Q8_K {f32 d; i8 qs[256]; i16 bsums[16]}  x ~= d * q, bsums[j] = sum of qs[16j..16j+16)
// Quantization: per block, d = max|x| / 127 (for Q8_0/Q8_1 rounded to f16 first,
// and q computed against that rounded d), q = round-half-even(x / d), so
// |q| <= 127. A row is quantized on its own (no dependence on other rows), and
// every instruction-set variant produces identical bytes. Inputs must be finite.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cpu/cpu_isa.h"
#include "tensor/dtype.h"

namespace pagellm::cpu {

// The activation type used with weights of type `weight` (throws Error for a
// type that has no CPU dot product, e.g. Q8_1 or Q8_K as weights).
DType dot_type(DType weight);

// Bytes of one activation row of n elements for weights of type `weight`
// (n must be a multiple of the weight type's block size).
size_t activation_row_bytes(DType weight, int64_t n);

// Writes the n floats at x to dst in dot_type(weight) (activation_row_bytes
// bytes; for F32 a plain copy).
void quantize_activation_row(DType weight, const float* x, void* dst, int64_t n,
                             CpuIsa isa = best_isa());

// Split Q8_0 rows, the activations of Rows16 weights (packed_weights.h): the
// same values as Q8_0 blocks, stored as three arrays so a kernel can broadcast
// 4 codes, a scale or a block sum straight from memory:
//   qs[n] i8 | d[n/32] f32 (each block's f16 scale, widened) | sum[n/32] i32
// (sum of the block's 32 codes). n must be a multiple of 32.
size_t split_q8_0_row_bytes(int64_t n);
void quantize_split_q8_0_row(const float* x, void* dst, int64_t n, CpuIsa isa = best_isa());

// Split Q8_K rows, the activations of Rows16 Q4_K / Q6_K weights: the same
// values as Q8_K blocks, as
//   qs[n] i8 | d[n/256] f32 | sum32[n/256][8] i16 | sum16[n/256][16] i16
// (sums of 32 and of 16 consecutive codes)
// n must be a multiple of 256.
size_t split_q8_k_row_bytes(int64_t n);
void quantize_split_q8_k_row(const float* x, void* dst, int64_t n, CpuIsa isa = best_isa());

}  // namespace pagellm::cpu
