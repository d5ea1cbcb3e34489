// One KV block of the prefix cache's disk tier as a file: a header that names
// what the bytes depend on (the model's content digest, KV type, block size,
// the layout of the layers' pools), the block's chained key, its parent's key
// and its tokens, then the payload (every layer's K and V slots of the
// block), with one checksum over all of it. A reader checks everything before
// a byte is used: a file that is short, damaged, or made for another model,
// KV type, block size, layout or prefix is refused with the reason.
//
// Layout (little-endian): magic "PGLKVBLK", u32 version, u32 n_tokens,
// u64 payload_bytes, 16-byte model digest, u32 kv_type, u32 block_size,
// 16-byte layout digest, 16-byte key, 16-byte parent key, u64 checksum (of
// the whole file with this field zero), then n_tokens i32 tokens, then the
// payload.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tensor/dtype.h"
#include "util/content_hash.h"

namespace pagellm {

// What a block's K/V bytes depend on besides its tokens.
struct BlockFileIdentity {
  Hash128 model;   // the model file's content
  DType kv_type = DType::F16;
  int32_t block_size = 16;
  Hash128 layout;  // the pools' layers, heads, head size, devices
  bool operator==(const BlockFileIdentity&) const = default;
};

// The key chain: the first block's parent is identity_key(identity), each
// block's key covers its parent's key and its tokens.
Hash128 identity_key(const BlockFileIdentity& id);
Hash128 block_key(const Hash128& parent, std::span<const int32_t> tokens);

struct BlockFileHeader {
  BlockFileIdentity identity;
  Hash128 key;
  Hash128 parent;
  std::vector<int32_t> tokens;
};

enum class BlockFileStatus {
  kOk,
  kTruncated,     // shorter (or longer) than its header says, or no header at all
  kNotBlockFile,  // another magic or version
  kChecksum,      // damaged: the checksum does not match
  kOtherModel,
  kOtherKvType,
  kOtherBlockSize,
  kOtherLayout,
  kOtherPrefix,   // another key, parent or tokens than asked for
  kOtherSize,     // a payload of another size than the layout's
};
const char* block_file_status_text(BlockFileStatus s);

constexpr size_t kBlockFileFixedHeader = 8 + 4 + 4 + 8 + 16 + 4 + 4 + 16 + 16 + 16 + 8;

// The file's bytes.
std::vector<uint8_t> encode_block_file(const BlockFileHeader& h, std::span<const uint8_t> payload);

// Reads a file's header and checks the checksum; on kOk, `header` holds it
// and `payload` the payload's bytes (a view into `file`).
BlockFileStatus parse_block_file(std::span<const uint8_t> file, BlockFileHeader& header,
                                 std::span<const uint8_t>& payload);

// parse_block_file, then the header must be `want`'s (identity, key, parent,
// tokens) and the payload `payload_bytes` long.
BlockFileStatus check_block_file(std::span<const uint8_t> file, const BlockFileHeader& want,
                                 size_t payload_bytes, std::span<const uint8_t>& payload);

}  // namespace pagellm
