// A fast non-cryptographic 128-bit content hash (two 64-bit lanes over
// 8-byte words, finished with the murmur3 mixer): the disk tier's file names,
// checksums and model identity. It detects accidental damage and keeps
// different contents apart; it is not meant to resist a forger.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

namespace pagellm {

struct Hash128 {
  uint64_t lo = 0;
  uint64_t hi = 0;
  bool operator==(const Hash128&) const = default;
  // 32 lowercase hex digits (hi first).
  std::string hex() const;
  static std::optional<Hash128> from_hex(std::string_view text);
};

class ContentHasher {
 public:
  explicit ContentHasher(uint64_t seed = 0);
  void update(const void* data, size_t bytes);
  template <class T>
    requires std::is_trivially_copyable_v<T>
  void add(const T& value) {
    update(&value, sizeof value);
  }
  void add(const Hash128& h) {
    add(h.lo);
    add(h.hi);
  }
  void add(std::string_view s) {
    add(static_cast<uint64_t>(s.size()));
    update(s.data(), s.size());
  }
  Hash128 digest() const;

 private:
  void mix(uint64_t word);

  uint64_t a_, b_;
  uint64_t length_ = 0;
  uint64_t tail_ = 0;  // bytes of an unfinished word, little-endian
  int tail_bytes_ = 0;
};

// The hash of one buffer.
Hash128 content_hash(const void* data, size_t bytes, uint64_t seed = 0);

}  // namespace pagellm
