// Every malformed-file case gives a FormatError naming the file, the field and
// the offset; none crashes. Files are built byte by byte.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "support/test_support.h"
#include "util/error.h"

namespace pagellm {
namespace {

using test::TempPath;

class Raw {
 public:
  Raw& u8(uint8_t v) { return put(v); }
  Raw& u32(uint32_t v) { return put(v); }
  Raw& u64(uint64_t v) { return put(v); }
  Raw& str(const std::string& s) {
    u64(s.size());
    bytes.append(s);
    return *this;
  }
  Raw& header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    return u32(kGgufMagic).u32(version).u64(n_tensors).u64(n_kv);
  }
  Raw& kv_u32(const std::string& key, uint32_t v) { return str(key).u32(4).u32(v); }
  Raw& tensor(const std::string& name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(ne.size()));
    for (uint64_t d : ne) u64(d);
    return u32(type).u64(offset);
  }
  Raw& pad(size_t alignment = 32) {
    while (bytes.size() % alignment) bytes.push_back(0);
    return *this;
  }
  Raw& zeros(size_t n) {
    bytes.append(n, '\0');
    return *this;
  }
  template <typename T>
  Raw& put(T v) {
    bytes.append(reinterpret_cast<const char*>(&v), sizeof(T));
    return *this;
  }
  std::string bytes;
};

// Opens `bytes` as a file and returns the FormatError message (fails if none).
std::string open_error(const std::string& bytes) {
  TempPath tmp(".gguf");
  test::write_file(tmp.path, bytes);
  try {
    GgufFile::open(tmp.path);
  } catch (const FormatError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(tmp.path), std::string::npos) << "message must name the file: " << msg;
    return msg;
  }
  ADD_FAILURE() << "no FormatError";
  return "";
}

#define EXPECT_ERROR(bytes, ...)                                                          \
  do {                                                                                    \
    std::string msg = open_error(bytes);                                                  \
    for (const char* part : {__VA_ARGS__})                                                \
      EXPECT_NE(msg.find(part), std::string::npos) << "'" << part << "' not in: " << msg; \
  } while (0)

TEST(GgufBadFile, TooSmallAndEmpty) {
  EXPECT_ERROR("", "too small", "offset 0");
  EXPECT_ERROR("GGUF\3\0\0\0", "too small");
}

TEST(GgufBadFile, BadMagic) {
  EXPECT_ERROR(Raw().u32(0x12345678).u32(3).u64(0).u64(0).bytes, "magic", "offset 0",
               "not a GGUF file");
}

TEST(GgufBadFile, UnsupportedVersion) {
  EXPECT_ERROR(Raw().header(1, 0, 0).bytes, "version", "offset 4", "unsupported GGUF version 1");
  EXPECT_ERROR(Raw().header(4, 0, 0).bytes, "unsupported GGUF version 4");
}

TEST(GgufBadFile, CountsThatCannotFit) {
  EXPECT_ERROR(Raw().header(3, 0, 1ull << 60).bytes, "kv_count", "offset 16", "cannot fit");
  EXPECT_ERROR(Raw().header(3, 1ull << 62, 0).bytes, "tensor_count", "offset 8", "cannot fit");
}

TEST(GgufBadFile, StringLengthPastEnd) {
  EXPECT_ERROR(Raw().header(3, 0, 1).u64(1000).bytes + "abcdefghijklmnop",
               "key of metadata entry 0", "offset 24", "exceeds");
  EXPECT_ERROR(Raw().header(3, 0, 1).str("k").u32(8).u64(~0ull).bytes, "value of key 'k'",
               "exceeds");
}

TEST(GgufBadFile, InvalidValueTypes) {
  EXPECT_ERROR(Raw().header(3, 0, 1).str("k").u32(13).u32(0).bytes, "type of key 'k'", "offset 33",
               "invalid value type 13");
  EXPECT_ERROR(Raw().header(3, 0, 1).str("k").u32(9).u32(99).u64(0).bytes,
               "invalid array element type 99");
  EXPECT_ERROR(Raw().header(3, 0, 1).str("k").u32(7).u8(2).bytes, "invalid bool value 2");
}

TEST(GgufBadFile, ArrayCountOverflow) {
  EXPECT_ERROR(Raw().header(3, 0, 1).str("k").u32(9).u32(12).u64(1ull << 61).bytes,
               "value of key 'k'", "cannot fit");
  EXPECT_ERROR(Raw().header(3, 0, 1).str("k").u32(9).u32(8).u64(1ull << 40).u64(0).bytes,
               "cannot fit");
}

TEST(GgufBadFile, ArraysNestedTooDeep) {
  Raw r;
  r.header(3, 0, 1).str("k").u32(9);
  for (int i = 0; i < 20; ++i) r.u32(9).u64(1);
  r.u32(4).u64(0);
  EXPECT_ERROR(r.bytes, "nested deeper");
}

TEST(GgufBadFile, DuplicateKey) {
  EXPECT_ERROR(Raw().header(3, 0, 2).kv_u32("a", 1).kv_u32("a", 2).bytes, "key 'a'",
               "duplicate key");
}

TEST(GgufBadFile, BadAlignment) {
  EXPECT_ERROR(Raw().header(3, 0, 1).kv_u32("general.alignment", 3).bytes, "general.alignment",
               "not a power of two");
  EXPECT_ERROR(Raw().header(3, 0, 1).kv_u32("general.alignment", 0).bytes, "not a power of two");
  EXPECT_ERROR(Raw().header(3, 0, 1).str("general.alignment").u32(8).str("x").bytes,
               "general.alignment", "expected an integer");
}

// A header with one 32-float F32 tensor described by the arguments.
std::string one_tensor(std::vector<uint64_t> ne, uint32_t type, uint64_t offset,
                       size_t data = 128) {
  return Raw().header(3, 1, 0).tensor("w", ne, type, offset).pad().zeros(data).bytes;
}

TEST(GgufBadFile, TensorDims) {
  EXPECT_ERROR(one_tensor({}, 0, 0), "tensor 'w' n_dims", "0 dimensions");
  EXPECT_ERROR(one_tensor({1, 1, 1, 1, 1}, 0, 0), "5 dimensions");
  EXPECT_ERROR(one_tensor({32, 0}, 0, 0), "tensor 'w' ne[1]", "invalid dimension 0");
  EXPECT_ERROR(one_tensor({1ull << 40, 1ull << 40}, 0, 0), "overflows");
}

TEST(GgufBadFile, TensorType) {
  EXPECT_ERROR(one_tensor({32}, 77, 0), "tensor 'w' type", "unknown or unsupported tensor type 77");
  EXPECT_ERROR(one_tensor({33}, static_cast<uint32_t>(DType::Q4_0), 0), "tensor 'w' ne[0]",
               "not a multiple of the q4_0 block size 32");
}

// MXFP4 (type 39): 17-byte blocks of 32; a row that is not whole blocks, or
// data the file does not hold, is refused; byte alignment is enough.
TEST(GgufBadFile, Mxfp4Sizes) {
  const uint32_t mx = static_cast<uint32_t>(DType::MXFP4);
  EXPECT_EQ(mx, 39u);
  EXPECT_ERROR(one_tensor({48, 2}, mx, 0), "tensor 'w' ne[0]",
               "not a multiple of the mxfp4 block size 32");
  // 32 x 8 elements = 8 blocks = 136 bytes, one past the 128 written.
  EXPECT_ERROR(one_tensor({32, 8}, mx, 0), "tensor 'w' offset", "[", "beyond", "truncated");
  for (uint64_t ne1 : {1ull, 7ull}) {  // 17 and 119 bytes: fit
    TempPath tmp(".gguf");
    test::write_file(tmp.path, one_tensor({32, ne1}, mx, 0));
    auto f = GgufFile::open(tmp.path);
    ASSERT_EQ(f->tensors().size(), 1u);
    EXPECT_EQ(f->tensors()[0].n_bytes, 17 * ne1);
  }
  // Two MXFP4 tensors back to back at an odd offset (general.alignment 1).
  auto odd = Raw().header(3, 2, 1).kv_u32("general.alignment", 1);
  odd.tensor("a", {32}, mx, 0).tensor("b", {64}, mx, 17).zeros(51);
  TempPath tmp(".gguf");
  test::write_file(tmp.path, odd.bytes);
  EXPECT_NO_THROW(GgufFile::open(tmp.path));
  auto overlap = Raw().header(3, 2, 1).kv_u32("general.alignment", 1);
  overlap.tensor("a", {32}, mx, 0).tensor("b", {64}, mx, 16).zeros(51);
  EXPECT_ERROR(overlap.bytes, "tensor 'b' offset", "overlaps tensor 'a'");
}

TEST(GgufBadFile, TensorOffsets) {
  EXPECT_ERROR(one_tensor({32}, 0, 4), "tensor 'w' offset", "not a multiple of the alignment 32");
  EXPECT_ERROR(one_tensor({32}, 0, 64), "tensor 'w' offset", "beyond", "truncated");
  EXPECT_ERROR(one_tensor({32}, 0, 0, 100), "beyond");
  EXPECT_ERROR(one_tensor({32}, 0, 1ull << 63), "beyond");
}

// With general.alignment 1 a tensor may start at any offset; one whose blocks
// would be read through misaligned pointers is refused (found by UBSan).
TEST(GgufBadFile, TensorDataMisalignedForItsType) {
  // One tensor whose data starts `rem` bytes past a multiple of 4 in the file.
  auto at = [](uint32_t type, uint64_t ne0, uint64_t rem) {
    auto build = [&](uint64_t offset) {
      return Raw().header(3, 1, 1).kv_u32("general.alignment", 1).tensor("w", {ne0}, type, offset);
    };
    const uint64_t data_start = build(0).bytes.size();  // alignment 1: no padding
    const uint64_t offset = (4 + rem - data_start % 4) % 4;
    return build(offset).zeros(offset + 256).bytes;
  };
  const uint32_t f16 = static_cast<uint32_t>(DType::F16), q8 = static_cast<uint32_t>(DType::Q8_0);
  EXPECT_ERROR(at(0, 8, 2), "tensor 'w' offset", "f32 data at file offset", "aligned to 4 bytes");
  EXPECT_ERROR(at(f16, 8, 1), "f16 data", "aligned to 2 bytes");
  EXPECT_ERROR(at(q8, 32, 3), "q8_0 data", "aligned to 2 bytes");
  for (auto [type, rem] : {std::pair{0u, 0ull}, {f16, 2ull}, {q8, 2ull}}) {
    TempPath tmp(".gguf");
    test::write_file(tmp.path, at(type, type == q8 ? 32 : 8, rem));
    EXPECT_NO_THROW(GgufFile::open(tmp.path)) << type << " at " << rem;
  }
}

TEST(GgufBadFile, DuplicateAndOverlappingTensors) {
  EXPECT_ERROR(
      Raw().header(3, 2, 0).tensor("w", {8}, 0, 0).tensor("w", {8}, 0, 32).pad().zeros(64).bytes,
      "tensor 'w'", "duplicate tensor name");
  EXPECT_ERROR(
      Raw().header(3, 2, 0).tensor("a", {16}, 0, 0).tensor("b", {8}, 0, 32).pad().zeros(64).bytes,
      "tensor 'b' offset", "overlaps tensor 'a'");
}

TEST(GgufBadFile, EveryTruncationIsACleanError) {
  GgufWriter w;
  w.set("general.architecture", GgufValue::str("llama"));
  w.set("arr", GgufValue::str_array({"x", "yy"}));
  w.set("f", GgufValue::f32(1));
  w.add_tensor("a", DType::F32, {8}, std::vector<uint8_t>(32, 1));
  w.add_tensor("b", DType::Q8_0, {32, 2}, std::vector<uint8_t>(68, 2));
  std::string full = w.to_bytes();
  TempPath tmp(".gguf");
  for (size_t n = 0; n < full.size(); ++n) {
    test::write_file(tmp.path, full.substr(0, n));
    EXPECT_THROW(GgufFile::open(tmp.path), FormatError) << "prefix " << n;
  }
  test::write_file(tmp.path, full);
  EXPECT_NO_THROW(GgufFile::open(tmp.path));
}

TEST(GgufBadFile, MissingFileIsASystemError) {
  try {
    GgufFile::open("/nonexistent/model.gguf");
    FAIL();
  } catch (const SystemError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/model.gguf"), std::string::npos);
  }
}

}  // namespace
}  // namespace pagellm
