// The software model of the AMX tile instructions (amx_tiles.h) against their
// definition written out here, and the shape checks the CPU makes.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <tuple>
#include <vector>

#include "backend/cpu/amx_tiles.h"
#include "util/error.h"

namespace pagellm::cpu::detail {
namespace {

TileConfig shapes(int m, int k_bytes, int n) {
  TileConfig cfg;
  cfg.rows[0] = static_cast<uint8_t>(m);  // A: m x k_bytes
  cfg.colsb[0] = static_cast<uint16_t>(k_bytes);
  cfg.rows[2] = static_cast<uint8_t>(k_bytes / 4);  // B: k_bytes / 4 x 4n
  cfg.colsb[2] = static_cast<uint16_t>(4 * n);
  cfg.rows[4] = static_cast<uint8_t>(m);  // C: m x n int32
  cfg.colsb[4] = static_cast<uint16_t>(4 * n);
  return cfg;
}

TEST(AmxModel, DpbsudAndDpbssdAreTheDotsOfDwordGroups) {
  std::mt19937 rng(7);
  const std::tuple<int, int, int> cases[] = {{16, 64, 16}, {5, 32, 16}, {3, 12, 7}};
  for (auto [m, k_bytes, n] : cases) {
    // Strided sources: rows further apart than they are long.
    const size_t sa = 80, sb = 72, sc = 68;
    std::vector<int8_t> a(sa * m);
    std::vector<uint8_t> b(sb * k_bytes / 4);
    std::vector<int32_t> c0(sc / 4 * m), c(sc / 4 * m, -1);
    for (auto& v : a) v = static_cast<int8_t>(rng());
    for (auto& v : b) v = static_cast<uint8_t>(rng());
    for (auto& v : c0) v = static_cast<int32_t>(rng() % 100000) - 50000;
    EmuTiles::configure(shapes(m, k_bytes, n));
    EmuTiles::load<0>(a.data(), sa);
    EmuTiles::load<2>(b.data(), sb);
    for (bool b_signed : {false, true}) {  // TDPBSUD, TDPBSSD
      EmuTiles::load<4>(c0.data(), sc);
      if (b_signed)
        EmuTiles::dpbssd<4, 0, 2>();
      else
        EmuTiles::dpbsud<4, 0, 2>();
      EmuTiles::store<4>(c.data(), sc);
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
          int64_t want = c0[i * sc / 4 + j];
          for (int k = 0; k < k_bytes; ++k) {
            const uint8_t bv = b[(k / 4) * sb + 4 * j + k % 4];
            want += int64_t{a[i * sa + k]} * (b_signed ? int64_t{static_cast<int8_t>(bv)} : bv);
          }
          ASSERT_EQ(c[i * sc / 4 + j], want) << m << "x" << k_bytes << "x" << n << " at " << i
                                             << "," << j << " signed " << b_signed;
        }
    }
    // Bytes past a stored row's colsb are left alone.
    for (int i = 0; i < m; ++i)
      for (size_t j = static_cast<size_t>(n); j < sc / 4; ++j) ASSERT_EQ(c[i * sc / 4 + j], -1);
    EmuTiles::zero<4>();
    EmuTiles::store<4>(c.data(), sc);
    EXPECT_EQ(c[0], 0);
    EmuTiles::release();
  }
}

TEST(AmxModel, RejectsWhatTheCpuRejects) {
  EmuTiles::release();
  EXPECT_THROW(EmuTiles::zero<4>(), Error);  // nothing configured
  TileConfig big = shapes(16, 64, 16);
  big.rows[1] = 17;
  big.colsb[1] = 64;
  EXPECT_THROW(EmuTiles::configure(big), Error);
  TileConfig wide = shapes(16, 64, 16);
  wide.colsb[3] = 65;
  wide.rows[3] = 1;
  EXPECT_THROW(EmuTiles::configure(wide), Error);
  EmuTiles::configure(shapes(4, 32, 16));
  EXPECT_THROW(EmuTiles::zero<1>(), Error);  // tile 1 not configured
  TileConfig bad = shapes(4, 32, 16);
  bad.rows[4] = 5;  // C's rows != A's
  EmuTiles::configure(bad);
  EXPECT_THROW((EmuTiles::dpbsud<4, 0, 2>()), Error);
  bad = shapes(4, 32, 16);
  bad.rows[2] = 7;  // B's rows != A's colsb / 4
  EmuTiles::configure(bad);
  EXPECT_THROW((EmuTiles::dpbsud<4, 0, 2>()), Error);
  EmuTiles::configure(shapes(4, 32, 16));
  EXPECT_THROW((EmuTiles::dpbsud<4, 4, 2>()), Error);  // the same tile twice
  EmuTiles::release();
}

}  // namespace
}  // namespace pagellm::cpu::detail
