// Instruction-set variants of the CPU kernels, chosen at run time. With GCC on
// x86-64 every variant is compiled in (simd.h) and the best one this CPU and
// OS support is used; the environment variable PAGELLM_CPU_ISA=scalar|avx2|
// avx512 lowers the choice (never above what the CPU runs). Every variant the
// CPU runs stays callable so tests can compare them against each other.
//
//   Scalar  portable C++ (always present, the reference)
//   Avx2    AVX2 + FMA + F16C, 256-bit
//   Avx512  AVX-512 F/BW/VL/DQ + VNNI: 512-bit float dots, VNNI integer dots
//           (and on 256-bit registers for the row-major quantized types);
//           where the CPU has AMX-INT8, the quantized Rows16 products (but
//           Q2_K, Q3_K) of 4 or more columns run on AMX tiles, with the same bits
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

// Variants compiled into this build that this CPU runs, Scalar first, best last.
std::span<const CpuIsa> available_isas();
// The variant used by default: the best available one, or lower if
// PAGELLM_CPU_ISA asks for it (an unknown value is ignored with a warning).
CpuIsa best_isa();
bool isa_available(CpuIsa isa);
const char* isa_name(CpuIsa isa);

// True when this CPU has AMX-TILE and AMX-INT8, the OS enables their state and
// granted it to this process (asked once, on the first call), and the
// environment variable PAGELLM_CPU_AMX is not "0" (backend/cpu/amx_tiles.h).
bool amx_int8_available();
// PAGELLM_CPU_AMX=model: the AMX kernels run on the software model of the
// tiles (amx_tiles.h; slow, for testing the kernels in whole models on CPUs
// without AMX). Needs the Avx512 variant; wins over the CPU's tiles.
bool amx_tile_model_requested();

// Whether the AVX-512 Rows16 kernels hint the L2 ahead of their weights in
// one-column tiles (decode) too, as they always do for wider tiles
// (packed_drive.h). On by default on Intel CPUs, where it lifts GEMV from DRAM
// by 10-30%; off elsewhere (Zen 4 read Q4_K faster without); the environment
// variable PAGELLM_GEMV_HINTS=0|1 overrides. A pure tuning choice: the hints
// change no value.
bool gemv_prefetch_hints();

}  // namespace pagellm::cpu
