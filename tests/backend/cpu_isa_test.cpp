// The instruction-set choice: what is available, what is picked, and the
// PAGELLM_CPU_ISA override (CTest also runs the golden model tests and these
// under PAGELLM_CPU_ISA=scalar and =avx2: tests/CMakeLists.txt).
#include "backend/cpu/cpu_isa.h"

#include "util/cpu_features.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

namespace pagellm::cpu {
namespace {

TEST(CpuIsa, ScalarFirstAndTheChoiceIsAvailable) {
  const auto isas = available_isas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.front(), CpuIsa::Scalar);
  for (size_t i = 1; i < isas.size(); ++i) EXPECT_LT(isas[i - 1], isas[i]);
  EXPECT_TRUE(isa_available(best_isa()));
  for (CpuIsa isa : {CpuIsa::Scalar, CpuIsa::Avx2, CpuIsa::Avx512}) {
    bool listed = false;
    for (CpuIsa a : isas) listed |= a == isa;
    EXPECT_EQ(isa_available(isa), listed) << isa_name(isa);
  }
}

TEST(CpuIsa, EnvironmentLowersTheChoiceOnly) {
  const char* want = std::getenv("PAGELLM_CPU_ISA");
  const CpuIsa best_available = available_isas().back();
  if (!want || !*want) {
    EXPECT_EQ(best_isa(), best_available);
    return;
  }
  for (CpuIsa isa : {CpuIsa::Scalar, CpuIsa::Avx2, CpuIsa::Avx512})
    if (std::strcmp(want, isa_name(isa)) == 0) {
      EXPECT_EQ(best_isa(), isa < best_available ? isa : best_available) << want;
      return;
    }
  EXPECT_EQ(best_isa(), best_available) << "unknown value " << want << " must be ignored";
}

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
// A GCC x86-64 build carries every variant, whatever its -march: the CPU
// decides. __builtin_cpu_supports is an independent reading of CPUID.
TEST(CpuIsa, GccBuildsOfferWhatTheCpuRuns) {
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") &&
                    __builtin_cpu_supports("popcnt");
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512cd") &&
                      __builtin_cpu_supports("avx512vnni");
  EXPECT_EQ(isa_available(CpuIsa::Avx2), avx2);
  EXPECT_EQ(isa_available(CpuIsa::Avx512), avx512);
}

TEST(CpuIsa, VendorMatchesGcc) {
  __builtin_cpu_init();
  EXPECT_EQ(cpu_features().intel, __builtin_cpu_is("intel") != 0);
  // The decode prefetch default follows it (unless the environment says).
  if (!std::getenv("PAGELLM_GEMV_HINTS")) {
    EXPECT_EQ(gemv_prefetch_hints(), __builtin_cpu_is("intel") != 0);
  }
}
#endif

// Set by the emulated-CPU CTest entries (tests/CMakeLists.txt): the variant
// that CPU must get, so an emulator that silently masks AVX2 cannot turn the
// AVX2 run into a second scalar run.
TEST(CpuIsa, EmulatedCpuGetsTheExpectedVariant) {
  const char* want = std::getenv("PAGELLM_EXPECT_ISA");
  if (!want || !*want) GTEST_SKIP() << "PAGELLM_EXPECT_ISA not set (only the emulated runs set it)";
  EXPECT_STREQ(isa_name(best_isa()), want);
}

}  // namespace
}  // namespace pagellm::cpu
