// GGUF metadata values: the 13 value types of the format, arrays nested to any
// depth (bounded by the reader). Values own their data.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace pagellm {

enum class GgufType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};

const char* gguf_type_name(GgufType t);
bool gguf_type_valid(uint32_t t);
// Encoded size of a fixed-size scalar type; 0 for STRING and ARRAY.
size_t gguf_scalar_size(GgufType t);

class GgufValue {
 public:
  GgufValue() = default;
  static GgufValue u8(uint8_t v) { return scalar(GgufType::UINT8, v); }
  static GgufValue i8(int8_t v) { return scalar(GgufType::INT8, v); }
  static GgufValue u16(uint16_t v) { return scalar(GgufType::UINT16, v); }
  static GgufValue i16(int16_t v) { return scalar(GgufType::INT16, v); }
  static GgufValue u32(uint32_t v) { return scalar(GgufType::UINT32, v); }
  static GgufValue i32(int32_t v) { return scalar(GgufType::INT32, v); }
  static GgufValue u64(uint64_t v) { return scalar(GgufType::UINT64, v); }
  static GgufValue i64(int64_t v) { return scalar(GgufType::INT64, v); }
  static GgufValue f32(float v);
  static GgufValue f64(double v);
  static GgufValue boolean(bool v);
  static GgufValue str(std::string v);
  // An array whose elements all have type `elem_type` (checked).
  static GgufValue array(GgufType elem_type, std::vector<GgufValue> elems);
  static GgufValue str_array(const std::vector<std::string>& v);
  static GgufValue f32_array(const std::vector<float>& v);
  static GgufValue i32_array(const std::vector<int32_t>& v);

  GgufType type() const { return type_; }
  GgufType elem_type() const { return elem_type_; }  // arrays only
  bool is_integer() const;
  bool is_float() const { return type_ == GgufType::FLOAT32 || type_ == GgufType::FLOAT64; }

  // Conversions; throw FormatError naming `what` when the value cannot be read as asked.
  uint64_t as_u64(const std::string& what) const;  // any non-negative integer
  int64_t as_i64(const std::string& what) const;   // any integer that fits
  double as_f64(const std::string& what) const;    // any integer or float
  bool as_bool(const std::string& what) const;
  const std::string& as_str(const std::string& what) const;
  const std::vector<GgufValue>& as_array(const std::string& what) const;

  // Raw storage (for the writer and printers).
  uint64_t raw_bits() const { return bits_; }
  const std::string& raw_str() const { return str_; }
  const std::vector<GgufValue>& raw_array() const { return arr_; }

  // Human-readable rendering; arrays longer than `max_elems` are abbreviated.
  std::string to_string(size_t max_elems = 8) const;

 private:
  template <typename T>
  static GgufValue scalar(GgufType t, T v) {
    GgufValue out;
    out.type_ = t;
    if constexpr (std::is_signed_v<T>)
      out.bits_ = static_cast<uint64_t>(static_cast<int64_t>(v));
    else
      out.bits_ = static_cast<uint64_t>(v);
    return out;
  }

  GgufType type_ = GgufType::UINT8;
  GgufType elem_type_ = GgufType::UINT8;
  uint64_t bits_ = 0;  // integers (sign-extended), bools, float bits (double for FLOAT64)
  std::string str_;
  std::vector<GgufValue> arr_;
};

}  // namespace pagellm
