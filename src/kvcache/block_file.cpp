#include "kvcache/block_file.h"

#include <algorithm>
#include <cstring>

namespace pagellm {

namespace {

constexpr char kMagic[8] = {'P', 'G', 'L', 'K', 'V', 'B', 'L', 'K'};
constexpr uint32_t kVersion = 1;
constexpr size_t kChecksumAt = kBlockFileFixedHeader - 8;

class Writer {
 public:
  explicit Writer(std::vector<uint8_t>& out) : out_(out) {}
  void bytes(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out_.insert(out_.end(), b, b + n);
  }
  template <class T>
  void put(const T& v) {
    bytes(&v, sizeof v);
  }
  void put(const Hash128& h) {
    put(h.lo);
    put(h.hi);
  }

 private:
  std::vector<uint8_t>& out_;
};

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> in) : in_(in) {}
  template <class T>
  T get() {
    T v;
    std::memcpy(&v, in_.data() + at_, sizeof v);
    at_ += sizeof v;
    return v;
  }
  Hash128 hash() {
    Hash128 h;
    h.lo = get<uint64_t>();
    h.hi = get<uint64_t>();
    return h;
  }

 private:
  std::span<const uint8_t> in_;
  size_t at_ = 0;
};

uint64_t checksum(std::span<const uint8_t> file) {
  ContentHasher h(0x6b76626c6f636bull);
  h.update(file.data(), kChecksumAt);
  const uint64_t zero = 0;
  h.add(zero);
  h.update(file.data() + kBlockFileFixedHeader, file.size() - kBlockFileFixedHeader);
  return h.digest().lo;
}

}  // namespace

Hash128 identity_key(const BlockFileIdentity& id) {
  ContentHasher h(0x6964656e74ull);
  h.add(id.model);
  h.add(static_cast<uint32_t>(id.kv_type));
  h.add(id.block_size);
  h.add(id.layout);
  return h.digest();
}

Hash128 block_key(const Hash128& parent, std::span<const int32_t> tokens) {
  ContentHasher h(0x626c6f636bull);
  h.add(parent);
  h.add(static_cast<uint64_t>(tokens.size()));
  h.update(tokens.data(), tokens.size_bytes());
  return h.digest();
}

const char* block_file_status_text(BlockFileStatus s) {
  switch (s) {
    case BlockFileStatus::kOk: return "ok";
    case BlockFileStatus::kTruncated: return "truncated";
    case BlockFileStatus::kNotBlockFile: return "not a KV block file of this version";
    case BlockFileStatus::kChecksum: return "damaged (checksum mismatch)";
    case BlockFileStatus::kOtherModel: return "made for another model";
    case BlockFileStatus::kOtherKvType: return "made for another KV type";
    case BlockFileStatus::kOtherBlockSize: return "made for another block size";
    case BlockFileStatus::kOtherLayout: return "made for another layer layout";
    case BlockFileStatus::kOtherPrefix: return "holds another prefix than its name says";
    case BlockFileStatus::kOtherSize: return "its payload has another size than the layout's";
  }
  return "unknown";
}

std::vector<uint8_t> encode_block_file(const BlockFileHeader& h, std::span<const uint8_t> payload) {
  std::vector<uint8_t> out;
  out.reserve(kBlockFileFixedHeader + h.tokens.size() * 4 + payload.size());
  Writer w(out);
  w.bytes(kMagic, sizeof kMagic);
  w.put(kVersion);
  w.put(static_cast<uint32_t>(h.tokens.size()));
  w.put(static_cast<uint64_t>(payload.size()));
  w.put(h.identity.model);
  w.put(static_cast<uint32_t>(h.identity.kv_type));
  w.put(static_cast<uint32_t>(h.identity.block_size));
  w.put(h.identity.layout);
  w.put(h.key);
  w.put(h.parent);
  w.put(uint64_t{0});
  w.bytes(h.tokens.data(), h.tokens.size() * sizeof(int32_t));
  w.bytes(payload.data(), payload.size());
  const uint64_t sum = checksum(out);
  std::memcpy(out.data() + kChecksumAt, &sum, sizeof sum);
  return out;
}

BlockFileStatus parse_block_file(std::span<const uint8_t> file, BlockFileHeader& header,
                                 std::span<const uint8_t>& payload) {
  if (file.size() < kBlockFileFixedHeader) return BlockFileStatus::kTruncated;
  if (std::memcmp(file.data(), kMagic, sizeof kMagic) != 0) return BlockFileStatus::kNotBlockFile;
  Reader r(file.subspan(sizeof kMagic));
  if (r.get<uint32_t>() != kVersion) return BlockFileStatus::kNotBlockFile;
  const uint64_t n_tokens = r.get<uint32_t>();
  const uint64_t payload_bytes = r.get<uint64_t>();
  // Sizes from the file are bounded by the file's own size before use.
  const uint64_t rest = file.size() - kBlockFileFixedHeader;
  if (n_tokens > rest / 4 || payload_bytes != rest - n_tokens * 4)
    return BlockFileStatus::kTruncated;
  BlockFileHeader h;
  h.identity.model = r.hash();
  h.identity.kv_type = static_cast<DType>(r.get<uint32_t>());
  h.identity.block_size = static_cast<int32_t>(r.get<uint32_t>());
  h.identity.layout = r.hash();
  h.key = r.hash();
  h.parent = r.hash();
  if (r.get<uint64_t>() != checksum(file)) return BlockFileStatus::kChecksum;
  h.tokens.resize(n_tokens);
  std::memcpy(h.tokens.data(), file.data() + kBlockFileFixedHeader, n_tokens * 4);
  header = std::move(h);
  payload = file.subspan(kBlockFileFixedHeader + n_tokens * 4);
  return BlockFileStatus::kOk;
}

BlockFileStatus check_block_file(std::span<const uint8_t> file, const BlockFileHeader& want,
                                 size_t payload_bytes, std::span<const uint8_t>& payload) {
  BlockFileHeader got;
  const BlockFileStatus s = parse_block_file(file, got, payload);
  if (s != BlockFileStatus::kOk) return s;
  if (!(got.identity.model == want.identity.model)) return BlockFileStatus::kOtherModel;
  if (got.identity.kv_type != want.identity.kv_type) return BlockFileStatus::kOtherKvType;
  if (got.identity.block_size != want.identity.block_size) return BlockFileStatus::kOtherBlockSize;
  if (!(got.identity.layout == want.identity.layout)) return BlockFileStatus::kOtherLayout;
  if (!(got.key == want.key) || !(got.parent == want.parent) || got.tokens != want.tokens)
    return BlockFileStatus::kOtherPrefix;
  if (payload.size() != payload_bytes) return BlockFileStatus::kOtherSize;
  return BlockFileStatus::kOk;
}

}  // namespace pagellm
