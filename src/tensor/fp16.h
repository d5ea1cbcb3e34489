// IEEE half and bfloat16 conversions (round to nearest even).
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#define PAGELLM_F16C_PATH 1
#include <immintrin.h>
#else
#define PAGELLM_F16C_PATH 0
#endif

namespace pagellm {

inline float fp32_from_bits(uint32_t w) {
  float f;
  std::memcpy(&f, &w, 4);
  return f;
}
inline uint32_t fp32_to_bits(float f) {
  uint32_t w;
  std::memcpy(&w, &f, 4);
  return w;
}

// Portable conversions, bit-identical to the x86 F16C instructions (NaNs are
// quieted and keep the top of their payload). Used when F16C is not
// available, and always available so that tests can compare both paths.
inline float fp16_to_fp32_portable(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  if (exp == 0) {
    if (mant == 0) return fp32_from_bits(sign);
    float v = static_cast<float>(mant) * (1.0f / 16777216.0f);  // mant * 2^-24, exact
    return sign ? -v : v;
  }
  if (exp == 31) {
    if (mant == 0) return fp32_from_bits(sign | 0x7f800000);  // infinity
    return fp32_from_bits(sign | 0x7fc00000 | (mant << 13));  // quiet NaN
  }
  return fp32_from_bits(sign | ((exp + 112) << 23) | (mant << 13));
}

inline uint16_t fp32_to_fp16_portable(float f) {
  uint32_t x = fp32_to_bits(f);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t ax = x & 0x7fffffff;
  if (ax > 0x7f800000)  // NaN: quiet it, keep the top 10 payload bits
    return static_cast<uint16_t>(sign | 0x7e00 | ((ax >> 13) & 0x3ff));
  if (ax >= 0x477ff000) return static_cast<uint16_t>(sign | 0x7c00);  // inf, or overflow -> inf
  if (ax < 0x38800000) {                                              // subnormal or zero
    float v = fp32_from_bits(ax) * 16777216.0f;                       // scale by 2^24, exact
    uint32_t m = static_cast<uint32_t>(__builtin_nearbyintf(v));      // nearest even
    return static_cast<uint16_t>(sign | m);
  }
  uint32_t r = ax + 0xfff + ((ax >> 13) & 1);  // round to nearest even
  return static_cast<uint16_t>(sign | ((r - 0x38000000) >> 13));
}

inline float fp16_to_fp32(uint16_t h) {
#if defined(__F16C__)
  return _cvtsh_ss(h);
#else
  return fp16_to_fp32_portable(h);
#endif
}

inline uint16_t fp32_to_fp16(float f) {
#if defined(__F16C__)
  return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
#else
  return fp32_to_fp16_portable(f);
#endif
}

#if PAGELLM_F16C_PATH
// The F16C instructions, compiled for F16C whatever the build's -march: call
// only when cpu_has_f16c().
__attribute__((target("f16c"))) inline float fp16_to_fp32_f16c(uint16_t h) {
  return _cvtsh_ss(h);
}
__attribute__((target("f16c"))) inline uint16_t fp32_to_fp16_f16c(float f) {
  return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}
#endif
// True if this CPU (and OS) runs AVX + F16C.
bool cpu_has_f16c();

inline float bf16_to_fp32(uint16_t h) {
  return fp32_from_bits(static_cast<uint32_t>(h) << 16);
}

inline uint16_t fp32_to_bf16(float f) {
  uint32_t x = fp32_to_bits(f);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 64);  // quiet NaN
  return static_cast<uint16_t>((x + (0x7fff + ((x >> 16) & 1))) >> 16);
}

}  // namespace pagellm
