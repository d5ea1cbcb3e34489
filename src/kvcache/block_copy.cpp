#include "kvcache/block_copy.h"

#include <cstring>

namespace pagellm {

size_t storage_block_bytes(const KvCacheStorage& storage) {
  size_t n = 0;
  for_each_block_part(storage, [&n](KvPool&, int32_t, uint8_t*, size_t bytes) { n += bytes; });
  return n;
}

void copy_block_out(const KvCacheStorage& storage, int32_t block, uint8_t* out) {
  size_t at = 0;
  for_each_block_part(storage, [&](KvPool& p, int32_t, uint8_t* base, size_t bytes) {
    const uint8_t* src = base + static_cast<size_t>(block) * bytes;
    if (p.backend() && !p.backend()->uses_host_memory())
      p.backend()->download(out + at, src, bytes);
    else
      std::memcpy(out + at, src, bytes);
    at += bytes;
  });
}

void copy_block_in(const KvCacheStorage& storage, int32_t block, const uint8_t* in) {
  size_t at = 0;
  for_each_block_part(storage, [&](KvPool& p, int32_t, uint8_t* base, size_t bytes) {
    uint8_t* dst = base + static_cast<size_t>(block) * bytes;
    if (p.backend() && !p.backend()->uses_host_memory())
      p.backend()->upload(dst, in + at, bytes);
    else
      std::memcpy(dst, in + at, bytes);
    at += bytes;
  });
}

Backend* device_pool_backend(const KvCacheStorage& storage) {
  Backend* found = nullptr;
  for_each_block_part(storage, [&found](KvPool& p, int32_t, uint8_t*, size_t) {
    if (!found && p.backend() && !p.backend()->uses_host_memory()) found = p.backend();
  });
  return found;
}

}  // namespace pagellm
