#include "util/host_pages.h"

#include <algorithm>
#include <utility>

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "util/error.h"
#include "util/sizes.h"

namespace pagellm {

namespace {

constexpr size_t kHugePage = size_t{2} << 20;

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif

size_t page_size() {
  static const size_t size = [] {
    const long v = ::sysconf(_SC_PAGESIZE);
    return v > 0 ? static_cast<size_t>(v) : size_t{4096};
  }();
  return size;
}

[[noreturn]] void fail(size_t bytes, int err) {
  throw SystemError(errno_message("cannot allocate " + format_size(bytes), err));
}

// Faults every page of [p, p + bytes) in for writing. MADV_POPULATE_WRITE
// reports a shortage as an error; kernels before 5.14 lack it and get the
// pages touched one by one (those fail, if they do, like any page fault).
bool populate(void* p, size_t bytes) {
  if (::madvise(p, bytes, MADV_POPULATE_WRITE) == 0) return true;
  if (errno != EINVAL) return false;
  // Writes back what is there: a page shared with a neighbour keeps its bytes.
  volatile uint8_t* b = static_cast<uint8_t*>(p);
  for (size_t off = 0; off < bytes; off += page_size()) b[off] = b[off];
  return true;
}

}  // namespace

bool host_huge_pages_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("PAGELLM_HUGEPAGES");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  return on;
}

namespace {
thread_local HostPagesProgress t_progress;
}  // namespace

ScopedHostPagesProgress::ScopedHostPagesProgress(HostPagesProgress fn)
    : previous_(std::exchange(t_progress, std::move(fn))) {}

ScopedHostPagesProgress::~ScopedHostPagesProgress() {
  t_progress = std::move(previous_);
}

void* allocate_host_pages(size_t bytes) {
  if (bytes == 0) return nullptr;
  if (bytes > SIZE_MAX - 2 * kHugePage) fail(bytes, ENOMEM);  // the sums below would wrap
  const bool huge = host_huge_pages_enabled() && bytes >= kHugePage;
  // For 2 MiB alignment, map one huge page more and trim both ends.
  const size_t span = huge ? bytes + kHugePage : bytes;
  void* m = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) fail(bytes, errno);
  auto* base = static_cast<uint8_t*>(m);
  uint8_t* p = base;
  if (huge) {
    p = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(base) + kHugePage - 1) &
                                   ~uintptr_t{kHugePage - 1});
    const size_t head = static_cast<size_t>(p - base);
    // munmap rounds the length up to whole pages: keep `bytes` rounded to pages.
    const size_t page = page_size();
    const size_t kept = (bytes + page - 1) / page * page;
    if (head) ::munmap(base, head);
    if (span - head > kept) ::munmap(p + kept, span - head - kept);
    // Only a hint: without THP support the region keeps 4 KiB pages.
    (void)::madvise(p, kept, MADV_HUGEPAGE);
  }
  // In chunks when someone watches the progress (same pages, same result).
  const size_t chunk = t_progress && bytes >= kHostPagesProgressChunk ? kHostPagesProgressChunk
                                                                       : bytes;
  for (size_t done = 0; done < bytes;) {
    const size_t n = std::min(chunk, bytes - done);
    if (!populate(p + done, n)) {
      const int err = errno;
      free_host_pages(p, bytes);
      fail(bytes, err);
    }
    done += n;
    if (chunk < bytes) t_progress(done, bytes);
  }
  return p;
}

void* reserve_host_pages(size_t bytes) {
  if (bytes == 0) return nullptr;
  void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) fail(bytes, errno);
#ifdef MADV_NOHUGEPAGE
  (void)::madvise(m, bytes, MADV_NOHUGEPAGE);
#endif
  return m;
}

bool populate_host_range(void* p, size_t bytes) noexcept {
  if (!p || bytes == 0) return true;
  const uintptr_t page = page_size();
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes + page - 1) / page * page;
  return populate(reinterpret_cast<void*>(begin), end - begin);
}

void release_host_range(void* p, size_t bytes) noexcept {
  if (!p || bytes == 0) return;
  const uintptr_t page = page_size();
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) / page * page;
  if (end > begin) (void)::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

void free_host_pages(void* p, size_t bytes) noexcept {
  if (p && bytes) ::munmap(p, bytes);
}

}  // namespace pagellm
