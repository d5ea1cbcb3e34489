#include "tensor/dtype.h"

#include <gtest/gtest.h>

#include <vector>

#include "tensor/convert.h"
#include "util/error.h"

namespace pagellm {
namespace {

struct Expected {
  DType type;
  uint32_t id;
  const char* name;
  int64_t block;
  size_t bytes;
};

// Sizes as in the GGML/GGUF specification of each block.
const Expected kExpected[] = {
    {DType::F32, 0, "f32", 1, 4},          {DType::F16, 1, "f16", 1, 2},
    {DType::Q4_0, 2, "q4_0", 32, 18},      {DType::Q4_1, 3, "q4_1", 32, 20},
    {DType::Q5_0, 6, "q5_0", 32, 22},      {DType::Q5_1, 7, "q5_1", 32, 24},
    {DType::Q8_0, 8, "q8_0", 32, 34},      {DType::Q8_1, 9, "q8_1", 32, 36},
    {DType::Q2_K, 10, "q2_k", 256, 84},    {DType::Q3_K, 11, "q3_k", 256, 110},
    {DType::Q4_K, 12, "q4_k", 256, 144},   {DType::Q5_K, 13, "q5_k", 256, 176},
    {DType::Q6_K, 14, "q6_k", 256, 210},   {DType::Q8_K, 15, "q8_k", 256, 292},
    {DType::IQ4_NL, 20, "iq4_nl", 32, 18}, {DType::IQ4_XS, 23, "iq4_xs", 256, 136},
    {DType::BF16, 30, "bf16", 1, 2},       {DType::MXFP4, 39, "mxfp4", 32, 17},
};

TEST(DType, TraitsMatchTheFileFormat) {
  for (const auto& e : kExpected) {
    SCOPED_TRACE(e.name);
    EXPECT_EQ(static_cast<uint32_t>(e.type), e.id);
    const DTypeTraits& t = dtype_traits(e.type);
    EXPECT_EQ(t.type, e.type);
    EXPECT_STREQ(t.name, e.name);
    EXPECT_STREQ(dtype_name(e.type), e.name);
    EXPECT_EQ(t.block_size, e.block);
    EXPECT_EQ(dtype_block_size(e.type), e.block);
    EXPECT_EQ(t.type_size, e.bytes);
    EXPECT_EQ(dtype_type_size(e.type), e.bytes);
    EXPECT_EQ(t.is_quantized, e.block > 1);
    auto by_id = dtype_traits_of(e.id);
    ASSERT_TRUE(by_id.has_value());
    EXPECT_EQ(by_id->type, e.type);
  }
}

TEST(DType, RowBytes) {
  EXPECT_EQ(dtype_row_bytes(DType::F32, 4096), 16384u);
  EXPECT_EQ(dtype_row_bytes(DType::F16, 4096), 8192u);
  EXPECT_EQ(dtype_row_bytes(DType::BF16, 3), 6u);
  EXPECT_EQ(dtype_row_bytes(DType::Q4_0, 4096), 128u * 18);
  EXPECT_EQ(dtype_row_bytes(DType::Q8_0, 64), 68u);
  EXPECT_EQ(dtype_row_bytes(DType::Q4_K, 4096), 16u * 144);
  EXPECT_EQ(dtype_row_bytes(DType::Q6_K, 256), 210u);
  EXPECT_EQ(dtype_row_bytes(DType::Q8_K, 512), 584u);
}

TEST(DType, UnknownIds) {
  for (uint32_t id : {4u, 5u, 16u, 17u, 29u, 31u, 1000u, 0xffffffffu}) {
    EXPECT_FALSE(dtype_traits_of(id).has_value()) << id;
  }
  EXPECT_THROW(dtype_traits(static_cast<DType>(4)), Error);
}

TEST(DType, ParsesNamesCaseInsensitively) {
  EXPECT_EQ(parse_dtype("f32"), DType::F32);
  EXPECT_EQ(parse_dtype("F16"), DType::F16);
  EXPECT_EQ(parse_dtype("bf16"), DType::BF16);
  EXPECT_EQ(parse_dtype("BF16"), DType::BF16);
  EXPECT_EQ(parse_dtype("Q4_0"), DType::Q4_0);
  EXPECT_EQ(parse_dtype("q5_1"), DType::Q5_1);
  EXPECT_EQ(parse_dtype("Q4_K"), DType::Q4_K);
  EXPECT_EQ(parse_dtype("q6_k"), DType::Q6_K);
  for (const auto& e : kExpected) EXPECT_EQ(parse_dtype(e.name), e.type) << e.name;
}

TEST(DType, UnknownNamesThrowConfigError) {
  for (const char* bad : {"", "q4", "q4_k_m", "fp16", "float", "q4_0 ", "i8", "q7_0"}) {
    EXPECT_THROW(parse_dtype(bad), ConfigError) << "'" << bad << "'";
  }
  try {
    parse_dtype("q9_9");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("q9_9"), std::string::npos);
  }
}

TEST(DType, CanQuantizeMatchesQuantizeRow) {
  for (const auto& e : kExpected) {
    SCOPED_TRACE(e.name);
    const DTypeTraits& t = dtype_traits(e.type);
    std::vector<float> x(static_cast<size_t>(t.block_size), 0.25f);
    std::vector<uint8_t> out(t.type_size);
    if (t.can_quantize) {
      EXPECT_NO_THROW(quantize_row(e.type, x.data(), out.data(), t.block_size));
    } else {
      EXPECT_THROW(quantize_row(e.type, x.data(), out.data(), t.block_size), Error);
    }
  }
}

TEST(DType, RowsMustBeWholeBlocks) {
  std::vector<float> x(512, 1.0f);
  std::vector<uint8_t> buf(4096);
  EXPECT_THROW(quantize_row(DType::Q4_0, x.data(), buf.data(), 31), Error);
  EXPECT_THROW(quantize_row(DType::Q4_K, x.data(), buf.data(), 128), Error);
  EXPECT_THROW(dequantize_row(DType::Q8_0, buf.data(), x.data(), 33), Error);
  EXPECT_THROW(dequantize_row(DType::Q6_K, buf.data(), x.data(), -256), Error);
  EXPECT_NO_THROW(dequantize_row(DType::F32, buf.data(), x.data(), 7));
  EXPECT_NO_THROW(dequantize_row(DType::Q8_0, buf.data(), x.data(), 0));
}

}  // namespace
}  // namespace pagellm
