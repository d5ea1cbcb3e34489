// The gpt-oss-shaped reference file of ../shared/golden/arch2026 stores its
// expert matrices in MXFP4 (written by gguf-py, as real gpt-oss GGUFs) and its
// F32 twin the same weights unquantized. Each MXFP4 tensor must decode exactly
// as a float64 rendition of the format written here from its description, land
// within the format's rounding bound of the F32 weights, and the engine's
// encoder must be no worse on those weights than the file's encoder.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <vector>

#include "gguf/gguf_reader.h"
#include "support/test_support.h"
#include "tensor/convert.h"
#include "tensor/dtype.h"

namespace pagellm {
namespace {

// E2M1 code -> value from its bit fields; E8M0 scale 2^(e - 127).
double e2m1(int code) {
  const int exp = (code >> 1) & 3, man = code & 1;
  const double mag = exp == 0 ? 0.5 * man : (1.0 + 0.5 * man) * std::ldexp(1.0, exp - 1);
  return code & 8 ? -mag : mag;
}

double naive_element(const uint8_t* row, int64_t i) {
  const uint8_t* blk = row + 17 * (i / 32);
  const int j = static_cast<int>(i % 32);
  const int code = j < 16 ? blk[1 + j] & 15 : blk[1 + j - 16] >> 4;
  return std::ldexp(1.0, blk[0] - 127) * e2m1(code);
}

TEST(Mxfp4File, ExpertsDecodeAsTheFormatSays) {
  const std::string dir = test::shared_path("golden/arch2026");
  const std::string mx_path = dir + "/rand-openai-moe-tok512-MXFP4.gguf";
  const std::string f32_path = dir + "/rand-openai-moe-tok512-F32.gguf";
  if (dir.empty() || !std::filesystem::exists(mx_path) || !std::filesystem::exists(f32_path))
    GTEST_SKIP() << "../shared/golden/arch2026 MXFP4 / F32 files are absent";
  auto mx = GgufFile::open(mx_path);
  auto f32 = GgufFile::open(f32_path);
  int checked = 0;
  for (const auto& t : mx->tensors()) {
    if (t.type != DType::MXFP4) continue;
    SCOPED_TRACE(t.name);
    const GgufTensorInfo* ref = f32->find_tensor(t.name);
    ASSERT_NE(ref, nullptr);
    ASSERT_EQ(ref->type, DType::F32);
    ASSERT_EQ(ref->ne, t.ne);
    const int64_t n = t.ne[0], rows = t.n_rows();
    const size_t row_bytes = dtype_row_bytes(DType::MXFP4, n);
    ASSERT_EQ(t.n_bytes, row_bytes * static_cast<size_t>(rows));
    std::vector<float> y(static_cast<size_t>(n)), w(static_cast<size_t>(n));
    std::vector<uint8_t> mine(row_bytes);
    std::vector<float> mine_y(static_cast<size_t>(n));
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t* row = t.data + static_cast<size_t>(r) * row_bytes;
      dequantize_row(DType::MXFP4, row, y.data(), n);
      std::memcpy(w.data(), ref->data + static_cast<size_t>(r * n) * 4, static_cast<size_t>(n) * 4);
      quantize_row(DType::MXFP4, w.data(), mine.data(), n);
      dequantize_row(DType::MXFP4, mine.data(), mine_y.data(), n);
      for (int64_t b = 0; b < n / 32; ++b) {
        double amax = 0, file_sse = 0, mine_sse = 0;
        for (int64_t i = 32 * b; i < 32 * b + 32; ++i) {
          ASSERT_EQ(static_cast<double>(y[i]), naive_element(row, i)) << "row " << r << " i " << i;
          amax = std::max(amax, std::fabs(static_cast<double>(w[i])));
          file_sse += std::pow(w[i] - static_cast<double>(y[i]), 2);
          mine_sse += std::pow(w[i] - static_cast<double>(mine_y[i]), 2);
        }
        // Scale 2^(floor(log2 amax) - 2): the widest gap (4 -> 6, clipped 6 -> 8)
        // leaves at most 2 scale units.
        const double s = std::ldexp(1.0, static_cast<int>(std::floor(std::log2(amax))) - 2);
        for (int64_t i = 32 * b; i < 32 * b + 32; ++i)
          ASSERT_LE(std::fabs(w[i] - static_cast<double>(y[i])), 2 * s * (1 + 1e-9));
        ASSERT_LE(mine_sse, file_sse * (1 + 1e-9)) << "row " << r << " block " << b;
      }
    }
    ++checked;
  }
  EXPECT_EQ(checked, 12);  // 4 layers x gate / up / down experts (the file's README)
}

}  // namespace
}  // namespace pagellm
