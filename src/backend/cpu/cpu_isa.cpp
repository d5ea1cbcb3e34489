#include "backend/cpu/cpu_isa.h"

#include "backend/cpu/simd.h"
#include "util/cpu_features.h"
#include "util/enum_names.h"

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace pagellm::cpu {

namespace {

// The variants this CPU runs: each needs everything its target pragma lets
// the compiler use (simd.h).
struct Runnable {
  bool avx2 = false;
  bool avx512 = false;
};

Runnable detect() {
  const CpuFeatures& c = cpu_features();
  Runnable r;
  r.avx2 = c.ymm_state && c.avx && c.avx2 && c.fma && c.f16c && c.bmi1 && c.bmi2 && c.popcnt;
  r.avx512 = r.avx2 && c.zmm_state && c.avx512f && c.avx512dq && c.avx512cd && c.avx512bw &&
             c.avx512vl && c.avx512vnni;
  return r;
}

bool runs(const Runnable& f, CpuIsa isa) {
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
    const Runnable f = detect();
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

bool gemv_prefetch_hints() {
  static const bool on = [] {
    if (const char* v = std::getenv("PAGELLM_GEMV_HINTS"); v && *v) return std::strcmp(v, "0") != 0;
    return cpu_features().intel;
  }();
  return on;
}

const char* isa_name(CpuIsa isa) {
  static constexpr std::array<const char*, 3> kNames = {"scalar", "avx2", "avx512"};
  static_assert(names_cover(CpuIsa::Avx512, kNames));
  return enum_name(isa, kNames);
}

}  // namespace pagellm::cpu
