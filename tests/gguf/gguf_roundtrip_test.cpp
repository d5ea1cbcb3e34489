#include <gtest/gtest.h>

#include <cstring>

#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "support/test_support.h"
#include "util/error.h"

namespace pagellm {
namespace {

using test::TempPath;

TEST(GgufRoundTrip, EveryValueTypeAndNestedArrays) {
  GgufWriter w;
  w.set("u8", GgufValue::u8(250));
  w.set("i8", GgufValue::i8(-100));
  w.set("u16", GgufValue::u16(60000));
  w.set("i16", GgufValue::i16(-30000));
  w.set("u32", GgufValue::u32(4000000000u));
  w.set("i32", GgufValue::i32(-2000000000));
  w.set("u64", GgufValue::u64(1ull << 60));
  w.set("i64", GgufValue::i64(-(1ll << 60)));
  w.set("f32", GgufValue::f32(1.5f));
  w.set("f64", GgufValue::f64(-2.25));
  w.set("bool", GgufValue::boolean(true));
  w.set("str", GgufValue::str("héllo\n"));
  w.set("strs", GgufValue::str_array({"a", "", "ccc"}));
  w.set("nested",
        GgufValue::array(GgufType::ARRAY, {GgufValue::i32_array({1, 2}), GgufValue::i32_array({}),
                                           GgufValue::i32_array({-3})}));
  std::vector<uint8_t> bytes(64 * 2 * 4);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7);
  w.add_tensor("t.weight", DType::F32, {64, 2}, bytes);
  w.add_tensor("q.weight", DType::Q8_0, {32, 3}, std::vector<uint8_t>(3 * 34, 0x11));
  TempPath tmp(".gguf");
  w.write_file(tmp.path);

  auto f = GgufFile::open(tmp.path);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->find("u8")->as_u64("u8"), 250u);
  EXPECT_EQ(f->find("i8")->as_i64("i8"), -100);
  EXPECT_EQ(f->find("u16")->as_u64("u16"), 60000u);
  EXPECT_EQ(f->find("i16")->as_i64("i16"), -30000);
  EXPECT_EQ(*f->get_u64("u32"), 4000000000u);
  EXPECT_EQ(*f->get_i64("i32"), -2000000000);
  EXPECT_EQ(*f->get_u64("u64"), 1ull << 60);
  EXPECT_EQ(*f->get_i64("i64"), -(1ll << 60));
  EXPECT_EQ(*f->get_f64("f32"), 1.5);
  EXPECT_EQ(*f->get_f64("f64"), -2.25);
  EXPECT_EQ(*f->get_bool("bool"), true);
  EXPECT_EQ(*f->get_str("str"), "héllo\n");
  const auto& strs = f->find("strs")->as_array("strs");
  ASSERT_EQ(strs.size(), 3u);
  EXPECT_EQ(strs[2].as_str(""), "ccc");
  const auto& nested = f->find("nested")->as_array("nested");
  ASSERT_EQ(nested.size(), 3u);
  EXPECT_EQ(nested[0].as_array("")[1].as_i64(""), 2);
  EXPECT_EQ(nested[1].as_array("").size(), 0u);
  EXPECT_EQ(nested[2].as_array("")[0].as_i64(""), -3);
  EXPECT_THROW(f->get_str("u8"), FormatError);
  EXPECT_THROW(f->get_u64("i8"), FormatError);  // negative
  EXPECT_FALSE(f->get_u64("absent").has_value());
  EXPECT_THROW(f->require_u64("absent"), FormatError);

  ASSERT_EQ(f->tensors().size(), 2u);
  const auto* t = f->find_tensor("t.weight");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->type, DType::F32);
  EXPECT_EQ(t->ne, (std::vector<int64_t>{64, 2}));
  EXPECT_EQ(t->n_bytes, bytes.size());
  EXPECT_EQ(std::memcmp(t->data, bytes.data(), bytes.size()), 0);
  const auto* q = f->find_tensor("q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->n_bytes, 3u * 34);
  EXPECT_EQ(q->data[0], 0x11);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(q->data - f->data_offset()) % 1, 0u);
  EXPECT_EQ(q->offset % f->alignment(), 0u);
}

TEST(GgufRoundTrip, CustomAlignmentAndVersion2) {
  GgufWriter w(2, 64);
  w.add_tensor("a", DType::F32, {3}, std::vector<uint8_t>(12, 1));
  w.add_tensor("b", DType::F16, {5}, std::vector<uint8_t>(10, 2));
  TempPath tmp(".gguf");
  w.write_file(tmp.path);
  for (bool mmap : {true, false}) {
    auto f = GgufFile::open(tmp.path, {.use_mmap = mmap});
    EXPECT_EQ(f->version(), 2u);
    EXPECT_EQ(f->alignment(), 64u);
    EXPECT_EQ(f->data_offset() % 64, 0u);
    EXPECT_EQ(f->find_tensor("b")->offset, 64u);
    EXPECT_EQ(f->find_tensor("b")->data[9], 2);
    EXPECT_EQ(f->is_mmap(), mmap);
  }
}

TEST(GgufRoundTrip, ReadsShippedModel) {
  auto f = GgufFile::open(test::data_path("stories260K.gguf"));
  EXPECT_EQ(f->require_str("general.architecture"), "llama");
  EXPECT_EQ(f->require_u64("llama.embedding_length"), 64u);
  EXPECT_EQ(f->require_u64("llama.block_count"), 5u);
  EXPECT_EQ(f->require_u64("llama.context_length"), 512u);
  EXPECT_EQ(f->find("tokenizer.ggml.tokens")->as_array("tokens").size(), 512u);
  const auto* emb = f->find_tensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->ne, (std::vector<int64_t>{64, 512}));
  EXPECT_EQ(emb->type, DType::F32);
  EXPECT_NE(f->find_tensor("output.weight"), nullptr);
}

TEST(GgufWriter, RejectsBadTensors) {
  GgufWriter w;
  EXPECT_THROW(w.add_tensor("x", DType::Q4_0, {33}, std::vector<uint8_t>(18)), Error);
  EXPECT_THROW(w.add_tensor("x", DType::F32, {0}, std::vector<uint8_t>()), Error);
  w.add_tensor("x", DType::F32, {1}, std::vector<uint8_t>(4));
  EXPECT_THROW(w.add_tensor("x", DType::F32, {1}, std::vector<uint8_t>(4)), Error);
  GgufWriter w2;
  w2.add_tensor("y", DType::F32, {2}, std::vector<uint8_t>(4));  // wrong byte count
  EXPECT_THROW(w2.to_bytes(), Error);
}

}  // namespace
}  // namespace pagellm
