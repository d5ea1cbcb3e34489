#include "backend/cpu/cpu_isa.h"

#include "backend/cpu/simd.h"

namespace pagellm::cpu {

namespace {
constexpr CpuIsa kIsas[] = {
    CpuIsa::Scalar,
#if PAGELLM_HAVE_AVX2
    CpuIsa::Avx2,
#endif
#if PAGELLM_HAVE_AVX512
    CpuIsa::Avx512,
#endif
};
}  // namespace

std::span<const CpuIsa> available_isas() {
  return kIsas;
}

CpuIsa best_isa() {
  return kIsas[sizeof(kIsas) / sizeof(kIsas[0]) - 1];
}

bool isa_available(CpuIsa isa) {
  for (CpuIsa i : kIsas)
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
