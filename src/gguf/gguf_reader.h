// GGUF reader (versions 2 and 3), over an mmap'd file or one read into memory.
//
// Layout, all little-endian:
//   u32 magic "GGUF" | u32 version | u64 tensor_count | u64 kv_count
//   kv_count x { string key | u32 value_type | value }
//   tensor_count x { string name | u32 n_dims | u64 ne[n_dims] | u32 dtype | u64 offset }
//   padding to `general.alignment` (u32, default 32, a power of two)
//   tensor data; each tensor at data_start + offset, offset a multiple of the alignment
// string = u64 length + bytes (no terminator); array = u32 elem_type + u64 count + elems.
// ne[0] is the row length (contiguous), and must be a multiple of the type's block size.
//
// Everything is validated before use; any problem throws FormatError with the
// file, the field and its byte offset.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gguf/gguf_value.h"
#include "tensor/dtype.h"
#include "util/mapped_file.h"

namespace pagellm {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" little-endian
constexpr uint32_t kGgufDefaultAlignment = 32;
constexpr int kGgufMaxDims = 4;

struct GgufTensorInfo {
  std::string name;
  DType type;
  std::vector<int64_t> ne;  // ne[0] = row length
  uint64_t offset = 0;      // relative to the data section
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr;  // into the file's mapping or buffer

  int64_t n_elements() const;
  int64_t n_rows() const { return ne.empty() ? 0 : n_elements() / ne[0]; }
};

struct GgufKV {
  std::string key;
  GgufValue value;
};

class GgufFile {
 public:
  struct Options {
    bool use_mmap = true;  // false: read the whole file into memory
    bool mlock = false;    // lock the tensor data in RAM
  };

  // Opens and validates. Throws SystemError (I/O) or FormatError (content).
  static std::unique_ptr<GgufFile> open(const std::string& path, Options opts);
  static std::unique_ptr<GgufFile> open(const std::string& path) { return open(path, Options{}); }

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return file_->size(); }
  bool is_mmap() const { return file_->is_mmap(); }

  const std::vector<GgufKV>& metadata() const { return kvs_; }
  const GgufValue* find(const std::string& key) const;
  // Typed look-ups; throw FormatError naming the key if present with the wrong type.
  std::optional<uint64_t> get_u64(const std::string& key) const;
  std::optional<int64_t> get_i64(const std::string& key) const;
  std::optional<double> get_f64(const std::string& key) const;
  std::optional<bool> get_bool(const std::string& key) const;
  std::optional<std::string> get_str(const std::string& key) const;
  // Throws FormatError "FILE: missing required key 'KEY'" when absent.
  uint64_t require_u64(const std::string& key) const;
  std::string require_str(const std::string& key) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(const std::string& name) const;

  // Bytes of tensor data (sum over tensors) and range of the data section.
  uint64_t tensor_data_bytes() const;
  // Starts reading the data section ahead of use (no-op without mmap).
  void prefetch() const;
  // Gives back the memory of the whole pages of tensor data inside
  // [p, p + len) once a copy of it is made (MappedFile::release).
  void release(const void* p, size_t len);
  // Throws SystemError if the mapped file shrank since it was opened (see
  // MappedFile::check_intact): tensor data read since then is unreliable.
  void check_intact() const { file_->check_intact(); }

 private:
  GgufFile() = default;
  void parse();

  std::string path_;
  std::unique_ptr<MappedFile> file_;
  uint32_t version_ = 0;
  uint32_t alignment_ = kGgufDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<GgufKV> kvs_;
  std::map<std::string, size_t> kv_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

}  // namespace pagellm
