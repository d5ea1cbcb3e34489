#include "util/content_hash.h"

#include <fmt/format.h>

#include <cstring>

namespace pagellm {

namespace {

constexpr uint64_t kP1 = 0x87c37b91114253d5ull;
constexpr uint64_t kP2 = 0x4cf5ad432745937full;
constexpr uint64_t kP3 = 0x9e3779b97f4a7c15ull;

uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

uint64_t fmix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ull;
  k ^= k >> 33;
  return k;
}

}  // namespace

std::string Hash128::hex() const { return fmt::format("{:016x}{:016x}", hi, lo); }

std::optional<Hash128> Hash128::from_hex(std::string_view text) {
  if (text.size() != 32) return std::nullopt;
  Hash128 h;
  for (size_t i = 0; i < 32; ++i) {
    const char c = text[i];
    uint64_t d;
    if (c >= '0' && c <= '9')
      d = static_cast<uint64_t>(c - '0');
    else if (c >= 'a' && c <= 'f')
      d = static_cast<uint64_t>(c - 'a' + 10);
    else
      return std::nullopt;
    uint64_t& lane = i < 16 ? h.hi : h.lo;
    lane = (lane << 4) | d;
  }
  return h;
}

ContentHasher::ContentHasher(uint64_t seed) : a_(seed ^ kP3), b_(rotl(seed, 29) ^ kP1) {}

void ContentHasher::mix(uint64_t w) {
  a_ ^= rotl(w * kP1, 31) * kP2;
  a_ = rotl(a_, 27) + b_;
  a_ = a_ * 5 + 0x52dce729;
  b_ ^= rotl(w * kP2, 33) * kP1;
  b_ = rotl(b_, 31) + a_;
  b_ = b_ * 5 + 0x38495ab5;
}

void ContentHasher::update(const void* data, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  length_ += bytes;
  while (tail_bytes_ > 0 && tail_bytes_ < 8 && bytes > 0) {
    tail_ |= static_cast<uint64_t>(*p++) << (8 * tail_bytes_++);
    --bytes;
  }
  if (tail_bytes_ == 8) {
    mix(tail_);
    tail_ = 0;
    tail_bytes_ = 0;
  }
  for (; bytes >= 8; bytes -= 8, p += 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);  // little-endian hosts only (as the GGUF reader)
    mix(w);
  }
  for (; bytes > 0; --bytes) tail_ |= static_cast<uint64_t>(*p++) << (8 * tail_bytes_++);
}

Hash128 ContentHasher::digest() const {
  uint64_t a = a_, b = b_;
  // The unfinished word, and the length (inputs that differ only by trailing zero bytes differ).
  a ^= rotl(tail_ * kP1, 31) * kP2;
  b ^= length_;
  a += b;
  b += a;
  a = fmix(a);
  b = fmix(b);
  a += b;
  b += a;
  return {a, b};
}

Hash128 content_hash(const void* data, size_t bytes, uint64_t seed) {
  ContentHasher h(seed);
  h.update(data, bytes);
  return h.digest();
}

}  // namespace pagellm
