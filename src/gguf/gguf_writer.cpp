#include "gguf/gguf_writer.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "gguf/gguf_reader.h"
#include "util/error.h"

namespace pagellm {

namespace {

class StringSink {
 public:
  void write(const void* p, size_t n) { out.append(static_cast<const char*>(p), n); }
  std::string out;
};

class FileSink {
 public:
  explicit FileSink(const std::string& path) : path_(path) {
    f_ = std::fopen(path.c_str(), "wb");
    if (!f_) throw SystemError(errno_message("cannot create '" + path + "'", errno));
  }
  ~FileSink() {
    if (f_) std::fclose(f_);
  }
  void write(const void* p, size_t n) {
    if (n && std::fwrite(p, 1, n, f_) != n)
      throw SystemError(errno_message("cannot write '" + path_ + "'", errno));
  }
  void close() {
    int rc = std::fclose(f_);
    f_ = nullptr;
    if (rc != 0) throw SystemError(errno_message("cannot write '" + path_ + "'", errno));
  }

 private:
  std::string path_;
  FILE* f_ = nullptr;
};

template <typename T, typename Sink>
void put(Sink& s, T v) {
  s.write(&v, sizeof(T));
}

template <typename Sink>
void put_string(Sink& s, const std::string& str) {
  put<uint64_t>(s, str.size());
  s.write(str.data(), str.size());
}

template <typename Sink>
void put_value(Sink& s, const GgufValue& v) {
  switch (v.type()) {
    case GgufType::STRING:
      put_string(s, v.raw_str());
      return;
    case GgufType::ARRAY:
      put<uint32_t>(s, static_cast<uint32_t>(v.elem_type()));
      put<uint64_t>(s, v.raw_array().size());
      for (const auto& e : v.raw_array()) put_value(s, e);
      return;
    default: {
      uint64_t bits = v.raw_bits();
      s.write(&bits, gguf_scalar_size(v.type()));  // little-endian: low bytes first
      return;
    }
  }
}

template <typename Sink>
void pad_to(Sink& s, uint64_t& pos, uint64_t alignment) {
  static const char zeros[64] = {};
  uint64_t target = (pos + alignment - 1) / alignment * alignment;
  while (pos < target) {
    uint64_t n = std::min<uint64_t>(target - pos, sizeof(zeros));
    s.write(zeros, n);
    pos += n;
  }
}

// Counts bytes without storing them, to learn the header size.
class CountSink {
 public:
  void write(const void*, size_t n) { count += n; }
  uint64_t count = 0;
};

}  // namespace

GgufWriter::GgufWriter(uint32_t version, uint32_t alignment)
    : version_(version), alignment_(alignment) {
  if (version != 2 && version != 3)
    throw Error(fmt::format("cannot write GGUF version {}", version));
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    throw Error(fmt::format("GGUF alignment {} is not a power of two", alignment));
  if (alignment != kGgufDefaultAlignment) set("general.alignment", GgufValue::u32(alignment));
}

void GgufWriter::set(const std::string& key, GgufValue value) {
  for (auto& kv : kvs_)
    if (kv.first == key) {
      kv.second = std::move(value);
      return;
    }
  kvs_.emplace_back(key, std::move(value));
}

void GgufWriter::add_tensor(const std::string& name, DType type, std::vector<int64_t> ne,
                            FillFn fill) {
  if (ne.empty() || ne.size() > static_cast<size_t>(kGgufMaxDims))
    throw Error(fmt::format("tensor '{}': {} dimensions", name, ne.size()));
  for (const auto& t : tensors_)
    if (t.name == name) throw Error(fmt::format("tensor '{}' added twice", name));
  int64_t n = 1;
  for (int64_t d : ne) {
    if (d <= 0) throw Error(fmt::format("tensor '{}': invalid dimension {}", name, d));
    n *= d;
  }
  if (ne[0] % dtype_block_size(type) != 0)
    throw Error(fmt::format("tensor '{}': row length {} is not a multiple of the {} block size {}",
                            name, ne[0], dtype_name(type), dtype_block_size(type)));
  Tensor t{name, type, std::move(ne), dtype_row_bytes(type, n), 0, std::move(fill)};
  t.offset = (data_bytes_ + alignment_ - 1) / alignment_ * alignment_;
  data_bytes_ = t.offset + t.n_bytes;
  tensors_.push_back(std::move(t));
}

void GgufWriter::add_tensor(const std::string& name, DType type, std::vector<int64_t> ne,
                            std::vector<uint8_t> bytes) {
  auto shared = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  add_tensor(name, type, std::move(ne), [shared, name](uint8_t* dst, size_t n) {
    if (shared->size() != n)
      throw Error(fmt::format("tensor '{}': {} bytes given, {} expected", name, shared->size(), n));
    std::memcpy(dst, shared->data(), n);
  });
}

template <typename Sink>
void GgufWriter::emit(Sink& sink) const {
  uint64_t pos = 0;
  CountSink counter;
  auto header = [&](auto& s) {
    put<uint32_t>(s, kGgufMagic);
    put<uint32_t>(s, version_);
    put<uint64_t>(s, tensors_.size());
    put<uint64_t>(s, kvs_.size());
    for (const auto& [key, value] : kvs_) {
      put_string(s, key);
      put<uint32_t>(s, static_cast<uint32_t>(value.type()));
      put_value(s, value);
    }
    for (const auto& t : tensors_) {
      put_string(s, t.name);
      put<uint32_t>(s, static_cast<uint32_t>(t.ne.size()));
      for (int64_t d : t.ne) put<uint64_t>(s, d);
      put<uint32_t>(s, static_cast<uint32_t>(t.type));
      put<uint64_t>(s, t.offset);
    }
  };
  header(counter);
  header(sink);
  pos = counter.count;
  pad_to(sink, pos, alignment_);
  uint64_t data_pos = 0;
  std::vector<uint8_t> buf;
  for (const auto& t : tensors_) {
    pad_to(sink, data_pos, alignment_);
    buf.assign(t.n_bytes, 0);
    t.fill(buf.data(), buf.size());
    sink.write(buf.data(), buf.size());
    data_pos += t.n_bytes;
  }
}

void GgufWriter::write_file(const std::string& path) const {
  std::string tmp = path + ".tmp";
  {
    FileSink sink(tmp);
    try {
      emit(sink);
      sink.close();
    } catch (...) {
      std::remove(tmp.c_str());
      throw;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    throw SystemError(errno_message("cannot rename '" + tmp + "' to '" + path + "'", err));
  }
}

std::string GgufWriter::to_bytes() const {
  StringSink sink;
  emit(sink);
  return std::move(sink.out);
}

}  // namespace pagellm
