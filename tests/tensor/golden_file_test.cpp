// The golden random-weight GGUFs (tests/data/golden/random) hold the same
// weights as F32 and as types made by llama.cpp's quantizer. Without a GGUF
// reader at this layer, the test reads one tensor, blk.0.attn_k.weight
// (256 x 128 = 32768 elements), at its absolute data offset in each file
// (header + tensor-info table parsed once, offline). Decoding the file's
// blocks must land near the F32 weights, and quantizing the F32 weights must
// reproduce llama.cpp's bytes exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "support/test_support.h"
#include "tensor/quant_test_util.h"

namespace pagellm {
namespace {

constexpr int64_t kElements = 256 * 128;

struct GoldenTensor {
  const char* file;
  DType type;
  size_t file_size;    // from the data README; guards against changed files
  size_t data_offset;  // absolute offset of blk.0.attn_k.weight's data
  double max_rel_rms;  // decode vs F32
};

const GoldenTensor kF32 = {"rand-llama-tok512-F32.gguf", DType::F32, 9984544, 801312, 0};
const GoldenTensor kQuantized[] = {
    {"rand-llama-tok512-F16.gguf", DType::F16, 5003808, 408096, 0.001},
    {"rand-llama-tok512-Q8_0.gguf", DType::Q8_0, 2669088, 223776, 0.008},
    {"rand-llama-tok512-Q4_0.gguf", DType::Q4_0, 1423904, 125472, 0.10},
    {"rand-llama-tok512-Q4_K.gguf", DType::Q4_K, 1424000, 88704, 0.08},
    {"rand-llama-tok512-Q6_K.gguf", DType::Q6_K, 2066048, 122496, 0.02},
};

std::string tensor_bytes(const GoldenTensor& g) {
  const std::string file = test::read_file(test::data_path("golden/random/" + std::string(g.file)));
  if (file.size() != g.file_size) return {};
  return file.substr(g.data_offset, dtype_row_bytes(g.type, kElements));
}

TEST(GoldenFiles, DecodeAndReencodeLikeLlamaCpp) {
  const std::string f32_bytes = tensor_bytes(kF32);
  ASSERT_EQ(f32_bytes.size(), static_cast<size_t>(kElements) * 4) << "F32 file changed?";
  std::vector<float> ref(kElements);
  std::memcpy(ref.data(), f32_bytes.data(), f32_bytes.size());
  double ref_sq = 0;
  for (float v : ref) ref_sq += static_cast<double>(v) * v;
  ASSERT_GT(ref_sq, 0);

  for (const auto& g : kQuantized) {
    SCOPED_TRACE(g.file);
    const std::string bytes = tensor_bytes(g);
    ASSERT_EQ(bytes.size(), dtype_row_bytes(g.type, kElements)) << "file changed?";

    std::vector<float> y(kElements);
    dequantize_row(g.type, bytes.data(), y.data(), kElements);
    double err_sq = 0;
    for (int64_t i = 0; i < kElements; ++i)
      err_sq += std::pow(static_cast<double>(y[i]) - ref[i], 2);
    EXPECT_LT(std::sqrt(err_sq / ref_sq), g.max_rel_rms);

    std::vector<uint8_t> mine(bytes.size());
    quantize_row(g.type, ref.data(), mine.data(), kElements);
    const size_t block_bytes = dtype_type_size(g.type);
    size_t differing = 0;
    for (size_t b = 0; b < bytes.size() / block_bytes; ++b)
      differing += std::memcmp(mine.data() + b * block_bytes, bytes.data() + b * block_bytes,
                               block_bytes) != 0;
    EXPECT_EQ(differing, 0u) << "blocks differing from llama.cpp's quantizer";
  }
}

}  // namespace
}  // namespace pagellm
