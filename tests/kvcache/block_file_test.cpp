// The disk tier's block file: what is written reads back, and every kind of
// damage or mismatch is refused with its reason (never read as a block).
#include "kvcache/block_file.h"

#include <gtest/gtest.h>

#include <random>

namespace pagellm {
namespace {

BlockFileHeader sample_header() {
  BlockFileHeader h;
  h.identity.model = {0x1111, 0x2222};
  h.identity.kv_type = DType::F16;
  h.identity.block_size = 4;
  h.identity.layout = {0x3333, 0x4444};
  h.parent = identity_key(h.identity);
  h.tokens = {5, 6, 7, 8};
  h.key = block_key(h.parent, h.tokens);
  return h;
}

std::vector<uint8_t> sample_payload(size_t n = 256) {
  std::mt19937 rng(7);
  std::vector<uint8_t> p(n);
  for (auto& b : p) b = static_cast<uint8_t>(rng());
  return p;
}

TEST(BlockFile, RoundTrip) {
  const BlockFileHeader h = sample_header();
  const auto payload = sample_payload();
  const auto file = encode_block_file(h, payload);
  EXPECT_EQ(file.size(), kBlockFileFixedHeader + 4 * 4 + payload.size());
  std::span<const uint8_t> got;
  ASSERT_EQ(check_block_file(file, h, payload.size(), got), BlockFileStatus::kOk);
  EXPECT_TRUE(std::equal(got.begin(), got.end(), payload.begin(), payload.end()));
  BlockFileHeader parsed;
  ASSERT_EQ(parse_block_file(file, parsed, got), BlockFileStatus::kOk);
  EXPECT_EQ(parsed.identity, h.identity);
  EXPECT_EQ(parsed.tokens, h.tokens);
  EXPECT_EQ(parsed.key, h.key);
  EXPECT_EQ(parsed.parent, h.parent);
}

TEST(BlockFile, KeysChainOverParentAndTokens) {
  const BlockFileHeader h = sample_header();
  const std::vector<int32_t> other = {5, 6, 7, 9};
  EXPECT_NE(block_key(h.parent, h.tokens), block_key(h.parent, other));
  EXPECT_NE(block_key(h.parent, h.tokens), block_key(h.key, h.tokens));
  BlockFileIdentity id = h.identity;
  id.kv_type = DType::Q8_0;
  EXPECT_NE(identity_key(id), identity_key(h.identity));
  id = h.identity;
  id.block_size = 8;
  EXPECT_NE(identity_key(id), identity_key(h.identity));
}

// Every shorter length, and a longer file: truncated.
TEST(BlockFile, EveryTruncationIsRefused) {
  const BlockFileHeader h = sample_header();
  const auto payload = sample_payload(64);
  auto file = encode_block_file(h, payload);
  std::span<const uint8_t> got;
  for (size_t n = 0; n < file.size(); ++n) {
    const BlockFileStatus s =
        check_block_file(std::span(file).first(n), h, payload.size(), got);
    EXPECT_NE(s, BlockFileStatus::kOk) << "cut at " << n;
  }
  file.push_back(0);
  EXPECT_EQ(check_block_file(file, h, payload.size(), got), BlockFileStatus::kTruncated);
}

// Any one flipped bit anywhere in the file.
TEST(BlockFile, EveryFlippedBitIsRefused) {
  const BlockFileHeader h = sample_header();
  const auto payload = sample_payload(64);
  const auto file = encode_block_file(h, payload);
  std::span<const uint8_t> got;
  for (size_t i = 0; i < file.size(); ++i)
    for (int bit = 0; bit < 8; bit += 3) {
      auto bad = file;
      bad[i] ^= static_cast<uint8_t>(1u << bit);
      EXPECT_NE(check_block_file(bad, h, payload.size(), got), BlockFileStatus::kOk)
          << "byte " << i << " bit " << bit;
    }
}

TEST(BlockFile, AnotherIdentityOrPrefixIsRefusedWithItsReason) {
  const BlockFileHeader want = sample_header();
  const auto payload = sample_payload();
  std::span<const uint8_t> got;
  auto check = [&](BlockFileHeader written) {
    return check_block_file(encode_block_file(written, payload), want, payload.size(), got);
  };
  BlockFileHeader h = want;
  h.identity.model.lo ^= 1;
  EXPECT_EQ(check(h), BlockFileStatus::kOtherModel);
  h = want;
  h.identity.kv_type = DType::F32;
  EXPECT_EQ(check(h), BlockFileStatus::kOtherKvType);
  h = want;
  h.identity.block_size = 8;
  EXPECT_EQ(check(h), BlockFileStatus::kOtherBlockSize);
  h = want;
  h.identity.layout.hi ^= 1;
  EXPECT_EQ(check(h), BlockFileStatus::kOtherLayout);
  h = want;
  h.tokens[3] = 9;
  EXPECT_EQ(check(h), BlockFileStatus::kOtherPrefix);
  h = want;
  h.parent.lo ^= 1;
  EXPECT_EQ(check(h), BlockFileStatus::kOtherPrefix);
  EXPECT_EQ(check_block_file(encode_block_file(want, payload), want, payload.size() + 2, got),
            BlockFileStatus::kOtherSize);
  std::vector<uint8_t> text(200, 'x');
  EXPECT_EQ(check_block_file(text, want, payload.size(), got), BlockFileStatus::kNotBlockFile);
}

TEST(ContentHash, HexRoundTripAndSensitivity) {
  const std::string a = "the quick brown fox", b = "the quick brown fix";
  const Hash128 ha = content_hash(a.data(), a.size()), hb = content_hash(b.data(), b.size());
  EXPECT_NE(ha, hb);
  EXPECT_EQ(Hash128::from_hex(ha.hex()), ha);
  EXPECT_FALSE(Hash128::from_hex("zz"));
  // Streaming in pieces equals one call.
  ContentHasher h;
  h.update(a.data(), 3);
  h.update(a.data() + 3, 9);
  h.update(a.data() + 12, a.size() - 12);
  EXPECT_EQ(h.digest(), ha);
  // Trailing zero bytes change the hash.
  const std::string z = a + std::string(1, '\0');
  EXPECT_NE(content_hash(z.data(), z.size()), ha);
}

}  // namespace
}  // namespace pagellm
