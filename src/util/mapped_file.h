// A read-only view of a whole file: either mmap'd (pages come in on demand and
// stay shared with the page cache) or read into an owned heap buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace pagellm {

class MappedFile {
 public:
  enum class Mode { kMmap, kRead };

  // Throws SystemError with the path and errno text on failure.
  MappedFile(const std::string& path, Mode mode = Mode::kMmap);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  bool is_mmap() const { return mode_ == Mode::kMmap; }

  // Locks [offset, offset+len) in RAM (mlock). Throws SystemError on failure.
  void lock(size_t offset, size_t len);
  // Hints that the range will be read (MADV_WILLNEED); no-op when read into memory.
  void prefetch(size_t offset, size_t len) const;

  // Gives back the memory of the whole pages inside [offset, offset+len) when
  // their bytes are no longer needed (a copy was made): with mmap they are
  // read from the file again if touched, read into memory they read as zeros.
  void release(size_t offset, size_t len);

  // Throws SystemError if the file shrank since it was mapped (checked with
  // fstat, and through SigbusGuard when a read past its new end was
  // repaired with zeros); what was computed from the data since the last
  // check is then unreliable. No-op when read into memory.
  void check_intact() const;

 private:
  std::string path_;
  Mode mode_;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool locked_ = false;
  int fd_ = -1;     // kept open while mapped, for check_intact()
  int guard_ = -1;  // SigbusGuard handle of the mapping
};

}  // namespace pagellm
