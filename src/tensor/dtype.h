// Tensor element types, numbered as in GGUF/GGML (the ids are stored in files).
// Quantized types pack `block_size` elements into `type_size` bytes; a row's
// length must be a multiple of the block size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pagellm {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ4_NL = 20,
  IQ4_XS = 23,
  BF16 = 30,
  MXFP4 = 39,
};

struct DTypeTraits {
  DType type;
  const char* name;    // "f32", "q4_0", ... (lower case, as on the command line)
  int64_t block_size;  // elements per block (1 for float types)
  size_t type_size;    // bytes per block
  bool is_quantized;
  bool can_quantize;  // quantize_row() supports it
};

// Traits for a supported type; nullopt for ids this engine does not know.
std::optional<DTypeTraits> dtype_traits_of(uint32_t id);
// Every type this engine knows, in id order.
const std::vector<DType>& all_dtypes();
// Traits for a known type (throws Error for an unknown one).
const DTypeTraits& dtype_traits(DType t);

inline const char* dtype_name(DType t) {
  return dtype_traits(t).name;
}
inline int64_t dtype_block_size(DType t) {
  return dtype_traits(t).block_size;
}
inline size_t dtype_type_size(DType t) {
  return dtype_traits(t).type_size;
}

// Alignment in bytes that rows of this type need in memory (the widest
// field of a block: 4 for F32 and Q8_K, 1 for MXFP4, 2 for the others).
size_t dtype_alignment(DType t);

// Bytes for `n` elements (n must be a multiple of the block size).
size_t dtype_row_bytes(DType t, int64_t n);

// Parses "q4_0", "Q4_0", "f16", ... Throws ConfigError for unknown names.
DType parse_dtype(std::string_view name);

}  // namespace pagellm
