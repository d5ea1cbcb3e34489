#include "kvcache/kv_pool.h"

#include <gtest/gtest.h>

#include <cstring>

#include "backend/cpu/kv_store.h"
#include "tensor/fp16.h"
#include "util/error.h"

namespace pagellm {
namespace {

TEST(KvPool, WritesRoundToDtypeAtSlot) {
  for (DType t : {DType::F16, DType::F32}) {
    KvPoolShape s{.layer_begin = 2,
                  .layer_end = 4,
                  .num_blocks = 3,
                  .block_size = 4,
                  .n_kv_heads = 2,
                  .head_dim = 8,
                  .dtype = t};
    KvPool pool(s);
    EXPECT_EQ(s.total_bytes(), 2u * 2 * 3 * 4 * 16 * dtype_type_size(t));
    std::vector<float> k(16), v(16);
    for (int i = 0; i < 16; ++i) k[i] = 0.1f * i + 1e-4f, v[i] = -0.3f * i;
    cpu::store_kv_row(t, 2, 8, k.data(), static_cast<uint8_t*>(pool.k(3)) + 7 * s.slot_bytes());
    cpu::store_kv_row(t, 2, 8, v.data(), static_cast<uint8_t*>(pool.v(3)) + 7 * s.slot_bytes());
    for (int i = 0; i < 16; ++i) {
      float kg, vg;
      if (t == DType::F32) {
        kg = static_cast<const float*>(pool.k(3))[7 * 16 + i];
        vg = static_cast<const float*>(pool.v(3))[7 * 16 + i];
        EXPECT_EQ(kg, k[i]);
      } else {
        kg = fp16_to_fp32(static_cast<const uint16_t*>(pool.k(3))[7 * 16 + i]);
        vg = fp16_to_fp32(static_cast<const uint16_t*>(pool.v(3))[7 * 16 + i]);
        EXPECT_EQ(kg, fp16_to_fp32(fp32_to_fp16(k[i])));
      }
      EXPECT_NEAR(vg, v[i], 4e-3);
    }
    // Other layer untouched (zeroed).
    EXPECT_EQ(static_cast<const uint8_t*>(pool.k(2))[7 * s.slot_bytes()], 0);
    EXPECT_THROW(pool.k(4), Error);
    EXPECT_THROW(pool.k(1), Error);
  }
}

TEST(KvPool, RejectsBadShapes) {
  KvPoolShape s{.layer_begin = 0,
                .layer_end = 1,
                .num_blocks = 1,
                .block_size = 16,
                .n_kv_heads = 1,
                .head_dim = 8,
                .dtype = DType::Q4_0};
  EXPECT_THROW(KvPool p(s), ConfigError);
  s.dtype = DType::F16;
  s.block_size = 0;
  EXPECT_THROW(KvPool p(s), ConfigError);
}

}  // namespace
}  // namespace pagellm
