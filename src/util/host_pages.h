// Large host buffers (KV pools, workspaces, repacked weights) as anonymous
// mappings backed by transparent huge pages where the kernel allows.
//
// Paged attention reads KV blocks scattered over a pool of gigabytes, and a
// decode step streams every weight once: with 4 KiB pages every 4 KiB of such
// a read needs a TLB entry, with 2 MiB pages every 2 MiB. (On the 2-core Zen 4
// this was measured on, the gain was within the noise: decode and attention
// are bound elsewhere there.) A buffer of at least 2 MiB is aligned to 2 MiB and
// marked MADV_HUGEPAGE before its pages are faulted in (THP in "madvise" mode
// only backs regions so marked); it is then populated, so that what the plan
// counted is resident from the start and a shortage fails here, cleanly,
// rather than later in a page fault. Huge pages change the granularity, not
// the amount: a buffer takes at most its size rounded up to 2 MiB.
//
// PAGELLM_HUGEPAGES=0 in the environment turns the hint off (4 KiB pages).
#pragma once

#include <cstddef>
#include <functional>

namespace pagellm {

// Zeroed, populated, page-aligned memory of `bytes` (nullptr for 0). Throws
// SystemError naming the size when the memory cannot be had.
void* allocate_host_pages(size_t bytes);
// Frees what allocate_host_pages(bytes) returned.
void free_host_pages(void* p, size_t bytes) noexcept;

// Elastic buffers (the KV pool that grows and shrinks, kvcache/elastic_pool.h):
// an address range reserved without populating it, in 4 KiB pages (no
// MADV_HUGEPAGE, and MADV_NOHUGEPAGE against THP "always": a 2 MiB fault
// would populate far more than the range asked for). Freed with
// free_host_pages. Throws SystemError when the range cannot be mapped.
void* reserve_host_pages(size_t bytes);
// Populates the pages covering [p, p + bytes) (rounded out to whole pages);
// false (errno set) when the memory cannot be had.
bool populate_host_range(void* p, size_t bytes) noexcept;
// Returns the pages wholly inside [p, p + bytes) to the OS (MADV_DONTNEED:
// they read as zeros when touched again); pages shared with the neighbours
// stay, so a range never clears bytes outside itself.
void release_host_range(void* p, size_t bytes) noexcept;

// Progress of the page population of large buffers (a KV cache of gigabytes
// takes seconds to touch): while a ScopedHostPagesProgress lives, this
// thread's allocate_host_pages calls of at least kHostPagesProgressChunk
// bytes report (done, total) after every chunk populated.
constexpr size_t kHostPagesProgressChunk = size_t{256} << 20;
using HostPagesProgress = std::function<void(size_t done, size_t total)>;
class ScopedHostPagesProgress {
 public:
  explicit ScopedHostPagesProgress(HostPagesProgress fn);
  ~ScopedHostPagesProgress();
  ScopedHostPagesProgress(const ScopedHostPagesProgress&) = delete;
  ScopedHostPagesProgress& operator=(const ScopedHostPagesProgress&) = delete;

 private:
  HostPagesProgress previous_;
};

// Whether allocate_host_pages asks for huge pages (PAGELLM_HUGEPAGES, default on).
bool host_huge_pages_enabled();

struct HostPagesFree {
  size_t bytes = 0;
  void operator()(void* p) const noexcept { free_host_pages(p, bytes); }
};

}  // namespace pagellm
