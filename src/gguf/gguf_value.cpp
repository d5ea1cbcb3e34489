#include "gguf/gguf_value.h"

#include <fmt/format.h>

#include <array>
#include <cstring>
#include <limits>

#include "util/enum_names.h"
#include "util/error.h"

namespace pagellm {

const char* gguf_type_name(GgufType t) {
  // In the file format's numbering.
  static constexpr std::array<const char*, 13> kNames = {
      "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64"};
  static_assert(names_cover(GgufType::FLOAT64, kNames));
  return enum_name(t, kNames);
}

bool gguf_type_valid(uint32_t t) {
  return t <= static_cast<uint32_t>(GgufType::FLOAT64);
}

size_t gguf_scalar_size(GgufType t) {
  switch (t) {
    case GgufType::UINT8:
    case GgufType::INT8:
    case GgufType::BOOL:
      return 1;
    case GgufType::UINT16:
    case GgufType::INT16:
      return 2;
    case GgufType::UINT32:
    case GgufType::INT32:
    case GgufType::FLOAT32:
      return 4;
    case GgufType::UINT64:
    case GgufType::INT64:
    case GgufType::FLOAT64:
      return 8;
    default:
      return 0;
  }
}

GgufValue GgufValue::f32(float v) {
  GgufValue out;
  out.type_ = GgufType::FLOAT32;
  uint32_t b;
  std::memcpy(&b, &v, 4);
  out.bits_ = b;
  return out;
}

GgufValue GgufValue::f64(double v) {
  GgufValue out;
  out.type_ = GgufType::FLOAT64;
  std::memcpy(&out.bits_, &v, 8);
  return out;
}

GgufValue GgufValue::boolean(bool v) {
  GgufValue out;
  out.type_ = GgufType::BOOL;
  out.bits_ = v ? 1 : 0;
  return out;
}

GgufValue GgufValue::str(std::string v) {
  GgufValue out;
  out.type_ = GgufType::STRING;
  out.str_ = std::move(v);
  return out;
}

GgufValue GgufValue::array(GgufType elem_type, std::vector<GgufValue> elems) {
  for (const auto& e : elems)
    if (e.type_ != elem_type)
      throw Error(fmt::format("array of {} given an element of type {}", gguf_type_name(elem_type),
                              gguf_type_name(e.type_)));
  GgufValue out;
  out.type_ = GgufType::ARRAY;
  out.elem_type_ = elem_type;
  out.arr_ = std::move(elems);
  return out;
}

GgufValue GgufValue::str_array(const std::vector<std::string>& v) {
  std::vector<GgufValue> elems;
  elems.reserve(v.size());
  for (const auto& s : v) elems.push_back(str(s));
  return array(GgufType::STRING, std::move(elems));
}

GgufValue GgufValue::f32_array(const std::vector<float>& v) {
  std::vector<GgufValue> elems;
  elems.reserve(v.size());
  for (float f : v) elems.push_back(f32(f));
  return array(GgufType::FLOAT32, std::move(elems));
}

GgufValue GgufValue::i32_array(const std::vector<int32_t>& v) {
  std::vector<GgufValue> elems;
  elems.reserve(v.size());
  for (int32_t x : v) elems.push_back(i32(x));
  return array(GgufType::INT32, std::move(elems));
}

bool GgufValue::is_integer() const {
  switch (type_) {
    case GgufType::UINT8:
    case GgufType::INT8:
    case GgufType::UINT16:
    case GgufType::INT16:
    case GgufType::UINT32:
    case GgufType::INT32:
    case GgufType::UINT64:
    case GgufType::INT64:
      return true;
    default:
      return false;
  }
}

static bool is_signed_type(GgufType t) {
  return t == GgufType::INT8 || t == GgufType::INT16 || t == GgufType::INT32 ||
         t == GgufType::INT64;
}

uint64_t GgufValue::as_u64(const std::string& what) const {
  if (!is_integer())
    throw FormatError(
        fmt::format("{}: expected an integer, found {}", what, gguf_type_name(type_)));
  if (is_signed_type(type_) && static_cast<int64_t>(bits_) < 0)
    throw FormatError(fmt::format("{}: expected a non-negative integer, found {}", what,
                                  static_cast<int64_t>(bits_)));
  return bits_;
}

int64_t GgufValue::as_i64(const std::string& what) const {
  if (!is_integer())
    throw FormatError(
        fmt::format("{}: expected an integer, found {}", what, gguf_type_name(type_)));
  if (type_ == GgufType::UINT64 &&
      bits_ > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    throw FormatError(fmt::format("{}: value {} out of range", what, bits_));
  return static_cast<int64_t>(bits_);
}

double GgufValue::as_f64(const std::string& what) const {
  if (type_ == GgufType::FLOAT32) {
    float f;
    uint32_t b = static_cast<uint32_t>(bits_);
    std::memcpy(&f, &b, 4);
    return f;
  }
  if (type_ == GgufType::FLOAT64) {
    double d;
    std::memcpy(&d, &bits_, 8);
    return d;
  }
  if (is_integer())
    return is_signed_type(type_) ? static_cast<double>(static_cast<int64_t>(bits_))
                                 : static_cast<double>(bits_);
  throw FormatError(fmt::format("{}: expected a number, found {}", what, gguf_type_name(type_)));
}

bool GgufValue::as_bool(const std::string& what) const {
  if (type_ != GgufType::BOOL)
    throw FormatError(fmt::format("{}: expected bool, found {}", what, gguf_type_name(type_)));
  return bits_ != 0;
}

const std::string& GgufValue::as_str(const std::string& what) const {
  if (type_ != GgufType::STRING)
    throw FormatError(fmt::format("{}: expected str, found {}", what, gguf_type_name(type_)));
  return str_;
}

const std::vector<GgufValue>& GgufValue::as_array(const std::string& what) const {
  if (type_ != GgufType::ARRAY)
    throw FormatError(fmt::format("{}: expected arr, found {}", what, gguf_type_name(type_)));
  return arr_;
}

std::string GgufValue::to_string(size_t max_elems) const {
  switch (type_) {
    case GgufType::STRING: {
      std::string s = "\"";
      for (unsigned char c : str_) {
        if (c == '"' || c == '\\')
          s += fmt::format("\\{}", static_cast<char>(c));
        else if (c < 0x20)
          s += fmt::format("\\x{:02x}", c);
        else
          s += static_cast<char>(c);
      }
      return s + "\"";
    }
    case GgufType::BOOL:
      return bits_ ? "true" : "false";
    case GgufType::FLOAT32:
    case GgufType::FLOAT64:
      return fmt::format("{}", as_f64(""));
    case GgufType::ARRAY: {
      std::string s = fmt::format("[{} x {}: ", arr_.size(), gguf_type_name(elem_type_));
      for (size_t i = 0; i < arr_.size() && i < max_elems; ++i)
        s += (i ? ", " : "") + arr_[i].to_string(max_elems);
      if (arr_.size() > max_elems) s += ", ...";
      return s + "]";
    }
    default:
      return is_signed_type(type_) ? fmt::format("{}", static_cast<int64_t>(bits_))
                                   : fmt::format("{}", bits_);
  }
}

}  // namespace pagellm
