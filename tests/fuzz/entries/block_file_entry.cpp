// A file of the prefix cache's disk tier (kvcache/block_file.h) as it might
// be found in --cache-dir after a crash, a full disk or another program:
// parsed and checked. What is accepted must lie inside the input, encode back
// to the same bytes, match its own header and no other prefix.
#include "entries/fuzz_entries.h"
#include "kvcache/block_file.h"

namespace pagellm::fuzz {

int block_file(const uint8_t* data, size_t size) {
  if (size > (1 << 16)) return 0;
  const std::span<const uint8_t> in(data, size);
  BlockFileHeader h;
  std::span<const uint8_t> payload, again;
  if (parse_block_file(in, h, payload) != BlockFileStatus::kOk) {
    if (check_block_file(in, h, 0, again) == BlockFileStatus::kOk)
      violated("check accepts what parse refuses");
    return 0;
  }
  if (payload.data() < data || payload.data() + payload.size() != data + size)
    violated("the payload lies outside the file");
  const std::vector<uint8_t> out = encode_block_file(h, payload);
  if (out.size() != size || !std::equal(out.begin(), out.end(), data))
    violated("an accepted file does not encode back to its bytes");
  if (check_block_file(in, h, payload.size(), again) != BlockFileStatus::kOk)
    violated("a file does not match its own header");
  BlockFileHeader other = h;
  other.tokens.push_back(1);
  if (check_block_file(in, other, payload.size(), again) == BlockFileStatus::kOk)
    violated("a file matches another prefix");
  other = h;
  other.identity.kv_type = h.identity.kv_type == DType::F16 ? DType::F32 : DType::F16;
  if (check_block_file(in, other, payload.size(), again) == BlockFileStatus::kOk)
    violated("a file matches another KV type");
  return 0;
}

}  // namespace pagellm::fuzz
