#include "util/mapped_file.h"

#include <algorithm>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "util/error.h"
#include "util/sigbus_guard.h"

namespace pagellm {

namespace {
constexpr size_t kReadAlign = 64;
}

MappedFile::MappedFile(const std::string& path, Mode mode) : path_(path), mode_(mode) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw SystemError(errno_message("cannot open '" + path + "'", errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    throw SystemError(errno_message("cannot stat '" + path + "'", err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw SystemError("'" + path + "' is not a regular file");
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ == 0) {
    ::close(fd);
    return;
  }
  if (mode == Mode::kMmap) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
    int err = errno;
    if (p == MAP_FAILED) {
      ::close(fd);
      throw SystemError(errno_message("cannot mmap '" + path + "'", err));
    }
    data_ = static_cast<uint8_t*>(p);
    fd_ = fd;
    guard_ = SigbusGuard::watch(data_, size_);
    return;
  }
  size_t alloc = (size_ + kReadAlign - 1) / kReadAlign * kReadAlign;
  data_ = static_cast<uint8_t*>(std::aligned_alloc(kReadAlign, alloc));
  if (!data_) {
    ::close(fd);
    throw SystemError("cannot allocate " + std::to_string(size_) + " bytes to read '" + path + "'");
  }
  size_t done = 0;
  while (done < size_) {
    ssize_t n = ::pread(fd, data_ + done, size_ - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = n < 0 ? errno : EIO;
      ::close(fd);
      std::free(data_);
      data_ = nullptr;
      throw SystemError(errno_message("cannot read '" + path + "'", err));
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (!data_) return;
  if (mode_ == Mode::kMmap) {
    SigbusGuard::unwatch(guard_);
    ::munmap(data_, size_);
    ::close(fd_);
  } else {
    if (locked_) ::munlock(data_, size_);
    std::free(data_);
  }
}

void MappedFile::lock(size_t offset, size_t len) {
  if (!data_ || len == 0) return;
  long page = ::sysconf(_SC_PAGESIZE);
  uintptr_t begin = reinterpret_cast<uintptr_t>(data_ + offset) & ~static_cast<uintptr_t>(page - 1);
  uintptr_t end = reinterpret_cast<uintptr_t>(data_ + offset + len);
  if (::mlock(reinterpret_cast<void*>(begin), end - begin) != 0)
    throw SystemError(errno_message("cannot mlock " + std::to_string(len) + " bytes of '" + path_ +
                                        "' (raise `ulimit -l` or drop --mlock)",
                                    errno));
  locked_ = true;
}

void MappedFile::prefetch(size_t offset, size_t len) const {
  if (!data_ || mode_ != Mode::kMmap || len == 0) return;
  long page = ::sysconf(_SC_PAGESIZE);
  uintptr_t begin = reinterpret_cast<uintptr_t>(data_ + offset) & ~static_cast<uintptr_t>(page - 1);
  uintptr_t end = reinterpret_cast<uintptr_t>(data_ + offset + len);
  ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_WILLNEED);
}

void MappedFile::release(size_t offset, size_t len) {
  if (!data_ || len == 0 || offset >= size_) return;
  len = std::min(len, size_ - offset);
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data_ + offset) + page - 1) & ~(page - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(data_ + offset + len) & ~(page - 1);
  if (end <= begin) return;
  if (locked_) ::munlock(reinterpret_cast<void*>(begin), end - begin);
  ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

void MappedFile::check_intact() const {
  if (mode_ != Mode::kMmap || !data_) return;
  struct stat st {};
  if (::fstat(fd_, &st) == 0 && static_cast<uint64_t>(st.st_size) < size_)
    throw SystemError("'" + path_ + "' was truncated while in use (" + std::to_string(st.st_size) +
                      " bytes, " + std::to_string(size_) + " when opened)");
  if (SigbusGuard::damaged(guard_))
    throw SystemError("'" + path_ + "' shrank while in use: part of it could not be read");
}

}  // namespace pagellm
