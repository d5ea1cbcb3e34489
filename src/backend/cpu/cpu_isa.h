// Instruction-set variants of the CPU kernels. Which ones exist is decided at
// compile time (the build uses -march=native by default); every compiled-in
// variant stays callable so tests can compare them against each other.
//
//   Scalar  portable C++ (always present, the reference)
//   Avx2    AVX2 + FMA + F16C, 256-bit
//   Avx512  AVX-512 F/BW/VL + VNNI: 512-bit float dots, VNNI integer dots
//           (on 256-bit registers) for the quantized types
//
// Within one variant every output is computed by the same sequence of
// operations whatever the batch size, position or thread count, so results
// are bit-identical across groupings. Different variants round differently
// (float accumulation order), except Avx2 and Avx512 for the quantized types,
// which share their accumulation order and agree bit for bit.
#pragma once

#include <span>

namespace pagellm::cpu {

enum class CpuIsa { Scalar = 0, Avx2 = 1, Avx512 = 2 };

// Variants compiled into this build, Scalar first, best last.
std::span<const CpuIsa> available_isas();
// The variant used by default: the best one compiled in.
CpuIsa best_isa();
bool isa_available(CpuIsa isa);
const char* isa_name(CpuIsa isa);

}  // namespace pagellm::cpu
