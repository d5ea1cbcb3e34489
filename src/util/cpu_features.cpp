#include "util/cpu_features.h"

#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace pagellm {

namespace {

CpuFeatures detect() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return f;
  f.intel = b == 0x756e6547u && d == 0x49656e69u && c == 0x6c65746eu;  // "Genu" "ineI" "ntel"
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & (1u << 27);
  f.avx = c & (1u << 28);
  f.f16c = c & (1u << 29);
  f.fma = c & (1u << 12);
  f.popcnt = c & (1u << 23);
  if (osxsave) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    f.ymm_state = (lo & 0x6) == 0x6;      // SSE + AVX state
    f.zmm_state = (lo & 0xE6) == 0xE6;    // + opmask, ZMM0-15 upper, ZMM16-31
    f.amx_state = ((lo >> 17) & 3) == 3;  // XTILECFG + XTILEDATA
  }
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
  f.avx2 = b & (1u << 5);
  f.bmi1 = b & (1u << 3);
  f.bmi2 = b & (1u << 8);
  f.avx512f = b & (1u << 16);
  f.avx512dq = b & (1u << 17);
  f.avx512cd = b & (1u << 28);
  f.avx512bw = b & (1u << 30);
  f.avx512vl = b & (1u << 31);
  f.avx512vnni = c & (1u << 11);
  f.amx_tile = d & (1u << 24);
  f.amx_int8 = d & (1u << 25);
#endif
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

}  // namespace pagellm
