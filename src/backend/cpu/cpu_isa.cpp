#include "backend/cpu/cpu_isa.h"

#include "backend/cpu/simd.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace pagellm::cpu {

namespace {

struct CpuFeatures {
  bool avx2 = false;    // AVX2 + FMA + F16C + BMI1/2 + POPCNT, with the OS saving YMM state
  bool avx512 = false;  // + AVX-512 F/BW/VL/DQ/CD/VNNI, with the OS saving ZMM state
};

#if defined(__x86_64__) || defined(__i386__)
uint64_t xgetbv0() {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & (1u << 27), avx = c & (1u << 28), fma = c & (1u << 12),
             f16c = c & (1u << 29), popcnt = c & (1u << 23);
  if (!osxsave || !avx) return f;
  const uint64_t xcr0 = xgetbv0();
  const bool ymm_state = (xcr0 & 0x6) == 0x6;    // SSE + AVX state
  const bool zmm_state = (xcr0 & 0xE6) == 0xE6;  // + opmask, ZMM0-15 upper, ZMM16-31
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
  const bool avx2 = b & (1u << 5), bmi1 = b & (1u << 3), bmi2 = b & (1u << 8);
  // Everything PAGELLM_TARGET_AVX2 lets the compiler use (simd.h).
  f.avx2 = ymm_state && avx2 && fma && f16c && bmi1 && bmi2 && popcnt;
  const bool avx512f = b & (1u << 16), avx512dq = b & (1u << 17), avx512cd = b & (1u << 28),
             avx512bw = b & (1u << 30), avx512vl = b & (1u << 31), vnni = c & (1u << 11);
  f.avx512 = f.avx2 && zmm_state && avx512f && avx512dq && avx512cd && avx512bw && avx512vl && vnni;
  return f;
}
#else
CpuFeatures detect() {
  return {};
}
#endif

bool runs(const CpuFeatures& f, CpuIsa isa) {
#if PAGELLM_ISA_DISPATCH
  switch (isa) {
    case CpuIsa::Scalar:
      return true;
    case CpuIsa::Avx2:
      return f.avx2;
    case CpuIsa::Avx512:
      return f.avx512;
  }
  return false;
#else
  (void)f;  // compiled for this CPU's flags: a variant built in runs
  (void)isa;
  return true;
#endif
}

struct IsaTable {
  std::vector<CpuIsa> available;
  CpuIsa best = CpuIsa::Scalar;
};

const IsaTable& table() {
  static const IsaTable t = [] {
    IsaTable r;
    const CpuFeatures f = detect();
    for (CpuIsa isa : {
           CpuIsa::Scalar,
#if PAGELLM_HAVE_AVX2
               CpuIsa::Avx2,
#endif
#if PAGELLM_HAVE_AVX512
               CpuIsa::Avx512,
#endif
         })
      if (runs(f, isa)) r.available.push_back(isa);
    r.best = r.available.back();
    if (const char* want = std::getenv("PAGELLM_CPU_ISA"); want && *want) {
      bool known = false;
      for (CpuIsa isa : {CpuIsa::Scalar, CpuIsa::Avx2, CpuIsa::Avx512})
        if (std::strcmp(want, isa_name(isa)) == 0) {
          known = true;
          if (isa < r.best) r.best = isa;
        }
      if (!known)
        std::fprintf(stderr, "pagellm: ignoring PAGELLM_CPU_ISA=%s (scalar, avx2 or avx512)\n",
                     want);
    }
    return r;
  }();
  return t;
}

}  // namespace

std::span<const CpuIsa> available_isas() {
  return table().available;
}

CpuIsa best_isa() {
  return table().best;
}

bool isa_available(CpuIsa isa) {
  for (CpuIsa i : table().available)
    if (i == isa) return true;
  return false;
}

const char* isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Scalar:
      return "scalar";
    case CpuIsa::Avx2:
      return "avx2";
    case CpuIsa::Avx512:
      return "avx512";
  }
  return "?";
}

}  // namespace pagellm::cpu
