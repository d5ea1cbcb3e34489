#include "backend/cpu/amx_tiles.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "util/cpu_features.h"
#include "util/error.h"

#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace pagellm::cpu {

namespace {

// Linux's arch_prctl codes for dynamically enabled state (asm/prctl.h) and
// the tile data's state component number.
constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtiledata = 18;

bool detect_amx() {
  const CpuFeatures& f = cpu_features();
  if (!(f.amx_state && f.amx_tile && f.amx_int8 && f.zmm_state && f.avx512vnni)) return false;
  if (const char* want = std::getenv("PAGELLM_CPU_AMX");
      want && (std::strcmp(want, "0") == 0 || std::strcmp(want, "model") == 0))
    return false;
#if PAGELLM_HAVE_AMX && defined(__linux__) && defined(__x86_64__)
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

}  // namespace

bool amx_int8_available() {
  static const bool available = detect_amx();
  return available;
}

bool amx_tile_model_requested() {
  static const bool requested = [] {
    const char* want = std::getenv("PAGELLM_CPU_AMX");
    return want && std::strcmp(want, "model") == 0;
  }();
  return requested;
}

}  // namespace pagellm::cpu

namespace pagellm::cpu::detail {

namespace {

struct EmuState {
  bool configured = false;
  TileConfig cfg;
  uint8_t data[8][16 * 64];
};
thread_local EmuState emu;

// The tile's shape, or Error where the CPU raises #UD.
void check_tile(int t, const char* op) {
  if (!emu.configured) throw Error(std::string("AMX model: ") + op + " with no tile configuration");
  if (t < 0 || t > 7 || emu.cfg.rows[t] == 0 || emu.cfg.colsb[t] == 0)
    throw Error(std::string("AMX model: ") + op + " on unconfigured tile " + std::to_string(t));
}

}  // namespace

void EmuTiles::configure(const TileConfig& cfg) {
  if (cfg.palette != 1 || cfg.start_row != 0)
    throw Error("AMX model: palette must be 1 and start row 0");
  for (int t = 0; t < 16; ++t) {
    const bool none = cfg.rows[t] == 0 && cfg.colsb[t] == 0;
    if (t >= 8 ? !none
               : !none && (cfg.rows[t] == 0 || cfg.rows[t] > 16 || cfg.colsb[t] == 0 ||
                           cfg.colsb[t] > 64))
      throw Error("AMX model: tile " + std::to_string(t) + " shape " + std::to_string(cfg.rows[t]) +
                  " x " + std::to_string(cfg.colsb[t]) + " bytes is outside 16 x 64");
  }
  emu.cfg = cfg;
  emu.configured = true;
  std::memset(emu.data, 0, sizeof emu.data);
}

void EmuTiles::release() {
  emu.configured = false;
}

void EmuTiles::zero_tile(int t) {
  check_tile(t, "tilezero");
  std::memset(emu.data[t], 0, sizeof emu.data[t]);
}

void EmuTiles::load_tile(int t, const void* base, size_t stride) {
  check_tile(t, "tileloadd");
  std::memset(emu.data[t], 0, sizeof emu.data[t]);
  for (int r = 0; r < emu.cfg.rows[t]; ++r)
    std::memcpy(emu.data[t] + 64 * r, static_cast<const uint8_t*>(base) + r * stride,
                emu.cfg.colsb[t]);
}

void EmuTiles::store_tile(int t, void* base, size_t stride) {
  check_tile(t, "tilestored");
  for (int r = 0; r < emu.cfg.rows[t]; ++r)
    std::memcpy(static_cast<uint8_t*>(base) + r * stride, emu.data[t] + 64 * r, emu.cfg.colsb[t]);
}

void EmuTiles::dot_tiles(int c, int a, int b, bool b_signed) {
  const char* name = b_signed ? "tdpbssd" : "tdpbsud";
  check_tile(c, name);
  check_tile(a, name);
  check_tile(b, name);
  const TileConfig& k = emu.cfg;
  if (c == a || c == b || a == b || k.rows[a] != k.rows[c] || k.colsb[a] != 4 * k.rows[b] ||
      k.colsb[b] != k.colsb[c] || k.colsb[a] % 4 != 0 || k.colsb[c] % 4 != 0)
    throw Error(std::string("AMX model: ") + name + " shapes disagree");
  for (int m = 0; m < k.rows[c]; ++m)
    for (int n = 0; n < k.colsb[c] / 4; ++n) {
      int32_t acc;
      std::memcpy(&acc, emu.data[c] + 64 * m + 4 * n, 4);
      for (int kk = 0; kk < k.colsb[a] / 4; ++kk)
        for (int i = 0; i < 4; ++i)
          acc += static_cast<int8_t>(emu.data[a][64 * m + 4 * kk + i]) *
                 (b_signed
                      ? static_cast<int32_t>(static_cast<int8_t>(emu.data[b][64 * kk + 4 * n + i]))
                      : static_cast<int32_t>(emu.data[b][64 * kk + 4 * n + i]));
      std::memcpy(emu.data[c] + 64 * m + 4 * n, &acc, 4);
    }
}

}  // namespace pagellm::cpu::detail
