// Float lanes for kernels written once and compiled per instruction set (the
// recurrent-state kernels: delta_rule_body.inc, ssm_conv_body.inc): a kernel
// body included in namespaces scalar, avx2 and avx512 finds `Lanes` there,
// a register of kWidth floats with the operations below. Every operation acts
// lane by lane with one rounding (fma: a * b + c rounded once), and exp is the
// same sequence of operations in every width, so a kernel that computes each
// output by the same operations in the same order gives the same bits in
// every variant. The vector Lanes live in simd.h (its exp8 / exp16 are
// written over them). Internal to backend/cpu.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "backend/cpu/simd.h"

namespace pagellm::cpu::lanes {

namespace scalar {
// exp's operations always inlined: exp_scalar runs inside the vector
// variants' kernels.
struct Lanes {
  using T = float;
  static constexpr int kWidth = 1;
  static constexpr int kTile = 4;  // registers per row in a kernel's tile
  static T load(const float* p) { return *p; }
  static void store(float* p, T v) { *p = v; }
  static __attribute__((always_inline)) T set1(float v) { return v; }
  static __attribute__((always_inline)) T fma(T a, T b, T c) { return std::fma(a, b, c); }
  static __attribute__((always_inline)) T fnma(T a, T b, T c) { return std::fma(-a, b, c); }
  static __attribute__((always_inline)) T mul(T a, T b) { return a * b; }
  static T add(T a, T b) { return a + b; }
  static T sub(T a, T b) { return a - b; }
  static T div(T a, T b) { return a / b; }
  static T max(T a, T b) { return a > b ? a : b; }  // as maxps: b when equal or unordered
  static __attribute__((always_inline)) T clamp(T x, T lo, T hi) {
    return std::min(std::max(x, lo), hi);
  }
  static __attribute__((always_inline)) T round(T x) { return std::nearbyint(x); }
  static __attribute__((always_inline)) bool ge(T a, T b) { return a >= b; }
  static __attribute__((always_inline)) T select(bool m, T v) { return m ? v : 0.0f; }
  static __attribute__((always_inline)) T pow2(T n) {
    return std::bit_cast<float>(static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23);
  }
  static T exp(T x);
};
#include "backend/cpu/lanes_exp.inc"
inline __attribute__((always_inline)) float Lanes::exp(float x) { return exp_flush(x); }
}  // namespace scalar

// exp(x) for one float (lanes_exp.inc's exp_flush): the recurrent kernels'
// scalar steps call it inside every variant.
inline __attribute__((always_inline)) float exp_scalar(float x) { return scalar::Lanes::exp(x); }

}  // namespace pagellm::cpu::lanes
