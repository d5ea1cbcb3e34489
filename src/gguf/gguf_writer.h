// GGUF writer (version 3 by default; format as described in gguf_reader.h).
// Metadata keeps insertion order. Tensor data is produced one tensor at a
// time when the file is written, so a multi-GiB model never sits in memory.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gguf/gguf_value.h"
#include "tensor/dtype.h"

namespace pagellm {

class GgufWriter {
 public:
  // Fills `dst` (exactly the tensor's byte size) with the tensor's data.
  using FillFn = std::function<void(uint8_t* dst, size_t n_bytes)>;

  explicit GgufWriter(uint32_t version = 3, uint32_t alignment = 32);

  // Adds or replaces a key (replacing keeps the original position).
  void set(const std::string& key, GgufValue value);
  // Adds a tensor; `ne[0]` is the row length. Throws Error on a bad shape or duplicate name.
  void add_tensor(const std::string& name, DType type, std::vector<int64_t> ne, FillFn fill);
  // Adds a tensor whose bytes are given (copied).
  void add_tensor(const std::string& name, DType type, std::vector<int64_t> ne,
                  std::vector<uint8_t> bytes);

  // Writes the file (atomically: to PATH.tmp, then renamed). Throws SystemError.
  void write_file(const std::string& path) const;
  // The whole file as bytes (for tests and small files).
  std::string to_bytes() const;

 private:
  struct Tensor {
    std::string name;
    DType type;
    std::vector<int64_t> ne;
    uint64_t n_bytes;
    uint64_t offset;
    FillFn fill;
  };
  template <typename Sink>
  void emit(Sink& sink) const;

  uint32_t version_;
  uint32_t alignment_;
  std::vector<std::pair<std::string, GgufValue>> kvs_;
  std::vector<Tensor> tensors_;
  uint64_t data_bytes_ = 0;
};

}  // namespace pagellm
