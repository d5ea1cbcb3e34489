#include "gguf/gguf_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "util/error.h"

namespace pagellm {

namespace {

constexpr int kMaxArrayDepth = 8;
constexpr uint64_t kMaxTensorNameLen = 1024;
// Smallest encodings, used to reject counts that cannot fit in the file.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;                  // empty key, u8 value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // empty name, 1 dim

// Bounds-checked little-endian reader over the file bytes. Every failure names
// the file, the field being read and the offset where it starts.
class Cursor {
 public:
  Cursor(const std::string& path, const uint8_t* data, uint64_t size)
      : path_(path), data_(data), size_(size) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  [[noreturn]] void fail(const std::string& field, uint64_t at, const std::string& msg) const {
    throw FormatError(fmt::format("{}: {} at offset {}: {}", path_, field, at, msg));
  }

  void need(uint64_t n, const std::string& field) const {
    if (n > remaining())
      fail(field, pos_,
           fmt::format("needs {} bytes but only {} remain (file truncated?)", n, remaining()));
  }

  template <typename T>
  T read(const std::string& field) {
    need(sizeof(T), field);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(const std::string& field, uint64_t max_len) {
    uint64_t at = pos_;
    uint64_t len = read<uint64_t>(field + " length");
    if (len > max_len)
      fail(field, at, fmt::format("string length {} exceeds the limit {}", len, max_len));
    if (len > remaining())
      fail(field, at,
           fmt::format("string length {} exceeds the {} bytes left in the file", len, remaining()));
    std::string s(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len;
    return s;
  }

 private:
  const std::string& path_;
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

uint64_t min_value_bytes(GgufType t) {
  if (t == GgufType::STRING) return 8;
  if (t == GgufType::ARRAY) return 4 + 8;
  return gguf_scalar_size(t);
}

GgufValue read_value(Cursor& c, GgufType type, const std::string& field, int depth) {
  switch (type) {
    case GgufType::UINT8:
      return GgufValue::u8(c.read<uint8_t>(field));
    case GgufType::INT8:
      return GgufValue::i8(c.read<int8_t>(field));
    case GgufType::UINT16:
      return GgufValue::u16(c.read<uint16_t>(field));
    case GgufType::INT16:
      return GgufValue::i16(c.read<int16_t>(field));
    case GgufType::UINT32:
      return GgufValue::u32(c.read<uint32_t>(field));
    case GgufType::INT32:
      return GgufValue::i32(c.read<int32_t>(field));
    case GgufType::UINT64:
      return GgufValue::u64(c.read<uint64_t>(field));
    case GgufType::INT64:
      return GgufValue::i64(c.read<int64_t>(field));
    case GgufType::FLOAT32:
      return GgufValue::f32(c.read<float>(field));
    case GgufType::FLOAT64:
      return GgufValue::f64(c.read<double>(field));
    case GgufType::BOOL: {
      uint64_t at = c.pos();
      uint8_t b = c.read<uint8_t>(field);
      if (b > 1) c.fail(field, at, fmt::format("invalid bool value {}", b));
      return GgufValue::boolean(b != 0);
    }
    case GgufType::STRING:
      return GgufValue::str(c.read_string(field, c.remaining()));
    case GgufType::ARRAY: {
      uint64_t at = c.pos();
      if (depth >= kMaxArrayDepth)
        c.fail(field, at, fmt::format("arrays nested deeper than {} levels", kMaxArrayDepth));
      uint32_t et = c.read<uint32_t>(field + " element type");
      if (!gguf_type_valid(et)) c.fail(field, at, fmt::format("invalid array element type {}", et));
      auto elem_type = static_cast<GgufType>(et);
      uint64_t count_at = c.pos();
      uint64_t count = c.read<uint64_t>(field + " element count");
      uint64_t min_bytes = min_value_bytes(elem_type);
      if (count > c.remaining() / min_bytes)
        c.fail(field, count_at,
               fmt::format("array of {} {} elements cannot fit in the {} bytes left", count,
                           gguf_type_name(elem_type), c.remaining()));
      std::vector<GgufValue> elems;
      elems.reserve(count);
      for (uint64_t i = 0; i < count; ++i)
        elems.push_back(read_value(c, elem_type, field, depth + 1));
      return GgufValue::array(elem_type, std::move(elems));
    }
  }
  c.fail(field, c.pos(), "invalid value type");
}

}  // namespace

int64_t GgufTensorInfo::n_elements() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path, Options opts) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = path;
  f->file_ = std::make_unique<MappedFile>(
      path, opts.use_mmap ? MappedFile::Mode::kMmap : MappedFile::Mode::kRead);
  f->parse();
  if (opts.mlock && f->tensor_data_bytes() > 0)
    f->file_->lock(f->data_offset_, f->file_->size() - f->data_offset_);
  return f;
}

void GgufFile::parse() {
  Cursor c(path_, file_->data(), file_->size());
  if (file_->size() < 4 + 4 + 8 + 8)
    c.fail("header", 0,
           fmt::format("file is {} bytes, too small for a GGUF header (24 bytes)", file_->size()));
  uint32_t magic = c.read<uint32_t>("magic");
  if (magic != kGgufMagic)
    c.fail("magic", 0,
           fmt::format("expected \"GGUF\" (0x{:08x}), found 0x{:08x}: not a GGUF file", kGgufMagic,
                       magic));
  version_ = c.read<uint32_t>("version");
  if (version_ != 2 && version_ != 3)
    c.fail("version", 4, fmt::format("unsupported GGUF version {} (supported: 2, 3)", version_));
  uint64_t n_tensors = c.read<uint64_t>("tensor_count");
  uint64_t n_kv = c.read<uint64_t>("kv_count");
  if (n_kv > c.remaining() / kMinKvBytes)
    c.fail("kv_count", 16,
           fmt::format("{} key-value pairs cannot fit in a {}-byte file", n_kv, file_->size()));
  if (n_tensors > c.remaining() / kMinTensorInfoBytes)
    c.fail("tensor_count", 8,
           fmt::format("{} tensor infos cannot fit in a {}-byte file", n_tensors, file_->size()));

  kvs_.reserve(n_kv);
  for (uint64_t i = 0; i < n_kv; ++i) {
    uint64_t at = c.pos();
    std::string key = c.read_string(fmt::format("key of metadata entry {}", i), c.remaining());
    if (key.empty()) c.fail(fmt::format("key of metadata entry {}", i), at, "empty key");
    if (kv_index_.count(key)) c.fail(fmt::format("key '{}'", key), at, "duplicate key");
    uint64_t type_at = c.pos();
    uint32_t t = c.read<uint32_t>(fmt::format("type of key '{}'", key));
    if (!gguf_type_valid(t))
      c.fail(fmt::format("type of key '{}'", key), type_at,
             fmt::format("invalid value type {}", t));
    GgufValue v = read_value(c, static_cast<GgufType>(t), fmt::format("value of key '{}'", key), 0);
    kv_index_[key] = kvs_.size();
    kvs_.push_back({std::move(key), std::move(v)});
  }

  if (const GgufValue* a = find("general.alignment")) {
    if (!a->is_integer())
      throw FormatError(fmt::format("{}: key 'general.alignment': expected an integer, found {}",
                                    path_, gguf_type_name(a->type())));
    uint64_t al = a->as_u64(path_ + ": key 'general.alignment'");
    if (al == 0 || (al & (al - 1)) != 0 || al > (1u << 20))
      throw FormatError(fmt::format(
          "{}: key 'general.alignment': {} is not a power of two between 1 and 1 MiB", path_, al));
    alignment_ = static_cast<uint32_t>(al);
  }

  struct Pending {
    uint64_t info_at;
  };
  std::vector<Pending> pending;
  tensors_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    uint64_t at = c.pos();
    GgufTensorInfo ti;
    ti.name = c.read_string(fmt::format("name of tensor {}", i), kMaxTensorNameLen);
    std::string field = fmt::format("tensor '{}'", ti.name);
    if (ti.name.empty()) c.fail(fmt::format("name of tensor {}", i), at, "empty tensor name");
    if (tensor_index_.count(ti.name)) c.fail(field, at, "duplicate tensor name");
    uint64_t dims_at = c.pos();
    uint32_t n_dims = c.read<uint32_t>(field + " n_dims");
    if (n_dims < 1 || n_dims > kGgufMaxDims)
      c.fail(field + " n_dims", dims_at,
             fmt::format("{} dimensions (must be 1 to {})", n_dims, kGgufMaxDims));
    int64_t n_el = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t ne_at = c.pos();
      uint64_t ne = c.read<uint64_t>(fmt::format("{} ne[{}]", field, d));
      if (ne == 0 || ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        c.fail(fmt::format("{} ne[{}]", field, d), ne_at, fmt::format("invalid dimension {}", ne));
      if (static_cast<uint64_t>(n_el) >
          static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / ne)
        c.fail(field + " shape", dims_at, "element count overflows 64 bits");
      n_el *= static_cast<int64_t>(ne);
      ti.ne.push_back(static_cast<int64_t>(ne));
    }
    uint64_t type_at = c.pos();
    uint32_t type_id = c.read<uint32_t>(field + " type");
    auto traits = dtype_traits_of(type_id);
    if (!traits)
      c.fail(field + " type", type_at,
             fmt::format("unknown or unsupported tensor type {}", type_id));
    ti.type = traits->type;
    if (ti.ne[0] % traits->block_size != 0)
      c.fail(field + " ne[0]", dims_at + 4,
             fmt::format("row length {} is not a multiple of the {} block size {}", ti.ne[0],
                         traits->name, traits->block_size));
    uint64_t blocks = static_cast<uint64_t>(n_el / traits->block_size);
    if (blocks > std::numeric_limits<uint64_t>::max() / traits->type_size)
      c.fail(field + " shape", dims_at, "byte size overflows 64 bits");
    ti.n_bytes = blocks * traits->type_size;
    uint64_t off_at = c.pos();
    ti.offset = c.read<uint64_t>(field + " offset");
    if (ti.offset % alignment_ != 0)
      c.fail(field + " offset", off_at,
             fmt::format("data offset {} is not a multiple of the alignment {}", ti.offset,
                         alignment_));
    tensor_index_[ti.name] = tensors_.size();
    tensors_.push_back(std::move(ti));
    pending.push_back({off_at});
  }

  uint64_t end_of_infos = c.pos();
  data_offset_ = (end_of_infos + alignment_ - 1) / alignment_ * alignment_;
  uint64_t data_size = data_offset_ <= file_->size() ? file_->size() - data_offset_ : 0;
  if (n_tensors > 0 && data_offset_ > file_->size())
    c.fail(
        "data section", end_of_infos,
        fmt::format("starts at {} (aligned to {}), past the end of the {}-byte file (truncated?)",
                    data_offset_, alignment_, file_->size()));

  // Every tensor inside the data section, none overlapping another.
  std::vector<size_t> order(tensors_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return tensors_[a].offset < tensors_[b].offset; });
  for (size_t k = 0; k < order.size(); ++k) {
    auto& ti = tensors_[order[k]];
    if (ti.offset > data_size || ti.n_bytes > data_size - ti.offset)
      c.fail(
          fmt::format("tensor '{}' offset", ti.name), pending[order[k]].info_at,
          fmt::format("data [{}, {}) lies beyond the {}-byte data section (file truncated?)",
                      data_offset_ + ti.offset, data_offset_ + ti.offset + ti.n_bytes, data_size));
    if (k + 1 < order.size()) {
      const auto& next = tensors_[order[k + 1]];
      if (ti.offset + ti.n_bytes > next.offset)
        c.fail(fmt::format("tensor '{}' offset", next.name), pending[order[k + 1]].info_at,
               fmt::format("data overlaps tensor '{}'", ti.name));
    }
    // The mapping (or read buffer) is page- (64-byte-) aligned, so file
    // offsets align as memory does; kernels read blocks through typed pointers.
    const uint64_t file_at = data_offset_ + ti.offset;
    if (file_at % dtype_alignment(ti.type) != 0)
      c.fail(fmt::format("tensor '{}' offset", ti.name), pending[order[k]].info_at,
             fmt::format("{} data at file offset {} is not aligned to {} bytes",
                         dtype_name(ti.type), file_at, dtype_alignment(ti.type)));
    ti.data = file_->data() + file_at;
  }
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kvs_[it->second].value;
}

std::optional<uint64_t> GgufFile::get_u64(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  return v->as_u64(path_ + ": key '" + key + "'");
}

std::optional<int64_t> GgufFile::get_i64(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  return v->as_i64(path_ + ": key '" + key + "'");
}

std::optional<double> GgufFile::get_f64(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  return v->as_f64(path_ + ": key '" + key + "'");
}

std::optional<bool> GgufFile::get_bool(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  return v->as_bool(path_ + ": key '" + key + "'");
}

std::optional<std::string> GgufFile::get_str(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  return v->as_str(path_ + ": key '" + key + "'");
}

uint64_t GgufFile::require_u64(const std::string& key) const {
  auto v = get_u64(key);
  if (!v) throw FormatError(fmt::format("{}: missing required key '{}'", path_, key));
  return *v;
}

std::string GgufFile::require_str(const std::string& key) const {
  auto v = get_str(key);
  if (!v) throw FormatError(fmt::format("{}: missing required key '{}'", path_, key));
  return *v;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

uint64_t GgufFile::tensor_data_bytes() const {
  uint64_t n = 0;
  for (const auto& t : tensors_) n += t.n_bytes;
  return n;
}

void GgufFile::release(const void* p, size_t len) {
  const auto* b = static_cast<const uint8_t*>(p);
  if (b < file_->data() + data_offset_ || b + len > file_->data() + file_->size()) return;
  file_->release(static_cast<size_t>(b - file_->data()), len);
}

void GgufFile::prefetch() const {
  if (data_offset_ < file_->size()) file_->prefetch(data_offset_, file_->size() - data_offset_);
}

}  // namespace pagellm
