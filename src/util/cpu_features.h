// What this CPU and its OS support, read once from CPUID (leaves 1 and 7) and
// XCR0. All false on other architectures. The kernels' instruction-set choice
// (backend/cpu/cpu_isa.h) and the F16C conversions (tensor/fp16.h) use it.
#pragma once

namespace pagellm {

struct CpuFeatures {
  bool intel = false;      // CPUID vendor "GenuineIntel" (tuning choices, never correctness)
  bool ymm_state = false;  // the OS saves AVX (YMM) state
  bool zmm_state = false;  // ... and AVX-512 state (opmask, ZMM upper halves, ZMM16-31)
  bool avx = false, f16c = false, fma = false, popcnt = false;
  bool avx2 = false, bmi1 = false, bmi2 = false;
  bool avx512f = false, avx512dq = false, avx512cd = false, avx512bw = false, avx512vl = false,
       avx512vnni = false;
  bool amx_state = false;  // the OS enables AMX tile config and data state (XCR0 bits 17, 18)
  bool amx_tile = false, amx_int8 = false;
};

const CpuFeatures& cpu_features();

}  // namespace pagellm
