#include "util/host_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "util/error.h"
#include "util/memory_stats.h"

namespace pagellm {
namespace {

// The VmFlags line of the /proc/self/smaps entry that holds address p.
std::string vm_flags_of(const void* p) {
  std::ifstream in("/proc/self/smaps");
  const auto a = reinterpret_cast<uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = a >= lo && a < hi;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return {};
}

TEST(HostPages, ZeroBytesIsNull) {
  EXPECT_EQ(allocate_host_pages(0), nullptr);
  free_host_pages(nullptr, 0);  // no-op
}

TEST(HostPages, SmallBufferIsZeroedAndWritable) {
  const size_t bytes = 10000;
  std::unique_ptr<uint8_t, HostPagesFree> p(static_cast<uint8_t*>(allocate_host_pages(bytes)),
                                            HostPagesFree{bytes});
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p.get()) % 4096, 0u);
  for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(p.get()[i], 0) << i;
  p.get()[bytes - 1] = 7;
  EXPECT_EQ(p.get()[bytes - 1], 7);
}

TEST(HostPages, LargeBufferIsResidentAlignedAndMarkedForHugePages) {
  const size_t bytes = (size_t{6} << 20) + 12345;  // not a multiple of any page
  const uint64_t rss0 = current_rss_bytes();
  std::unique_ptr<uint8_t, HostPagesFree> p(static_cast<uint8_t*>(allocate_host_pages(bytes)),
                                            HostPagesFree{bytes});
  // Populated: resident before anything touches it.
  EXPECT_GE(current_rss_bytes(), rss0 + bytes - 4096);
  EXPECT_EQ(p.get()[0], 0);
  EXPECT_EQ(p.get()[bytes - 1], 0);
  if (!host_huge_pages_enabled()) GTEST_SKIP() << "PAGELLM_HUGEPAGES=0";
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p.get()) % (size_t{2} << 20), 0u);
  const std::string flags = vm_flags_of(p.get());
  ASSERT_FALSE(flags.empty()) << "no smaps entry for the buffer";
  // "hg": the region carries MADV_HUGEPAGE (absent only on kernels without THP).
  if (flags.find(" hg") == std::string::npos) {
    std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
    if (!thp) GTEST_SKIP() << "kernel without transparent huge pages";
    ADD_FAILURE() << "MADV_HUGEPAGE missing: " << flags;
  }
}

// Sizes no machine has, including ones where adding the alignment slack
// would wrap around.
TEST(HostPages, ImpossibleSizeThrowsNamingTheSize) {
  for (size_t bytes : {size_t{1} << 60, SIZE_MAX, SIZE_MAX - 4096, SIZE_MAX - (size_t{2} << 20)}) {
    try {
      allocate_host_pages(bytes);
      FAIL() << "no exception for " << bytes;
    } catch (const SystemError& e) {
      EXPECT_NE(std::string(e.what()).find("cannot allocate"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace pagellm

namespace pagellm {
namespace {

// A watched allocation reports each populated chunk in order, ending at the
// total; an unwatched one (or a small one) reports nothing; the scope nests.
TEST(HostPages, ProgressReportsEveryChunkWhileWatched) {
  const size_t bytes = 2 * kHostPagesProgressChunk + (3u << 20);
  std::vector<std::pair<size_t, size_t>> seen;
  {
    ScopedHostPagesProgress watch([&](size_t done, size_t total) { seen.push_back({done, total}); });
    void* p = allocate_host_pages(bytes);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(static_cast<uint8_t*>(p)[bytes - 1], 0);
    free_host_pages(p, bytes);
    void* small = allocate_host_pages(1 << 20);
    free_host_pages(small, 1 << 20);
  }
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0], std::make_pair(kHostPagesProgressChunk, bytes));
  EXPECT_EQ(seen[1], std::make_pair(2 * kHostPagesProgressChunk, bytes));
  EXPECT_EQ(seen[2], std::make_pair(bytes, bytes));
  void* p = allocate_host_pages(bytes);  // no longer watched
  free_host_pages(p, bytes);
  EXPECT_EQ(seen.size(), 3u);
}

}  // namespace
}  // namespace pagellm
