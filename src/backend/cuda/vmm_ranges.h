// Elastic device memory for the CUDA backend (Backend::reserve_range, the KV
// pool that gives chunks back): a reserved virtual address range per pool,
// physical memory mapped into it granule by granule with the driver's VMM
// API (cuMemAddressReserve once; cuMemCreate + cuMemMap + cuMemSetAccess to
// commit, cuMemUnmap + cuMemRelease to give back), so a pool's pointers and
// block ids never move while its memory comes and goes. A granule that two
// committed ranges touch is counted for each and unmapped when the last goes.
// The driver's functions are looked up through the runtime
// (cudaGetDriverEntryPointByVersion), so nothing links libcuda, which a
// machine without a GPU lacks. No CUDA types here (the .cpp has them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

namespace pagellm::cuda {

class VmmRanges {
 public:
  explicit VmmRanges(int device) : device_(device) {}
  ~VmmRanges();
  VmmRanges(const VmmRanges&) = delete;
  VmmRanges& operator=(const VmmRanges&) = delete;

  // Whether the GPU and driver map memory this way (probed once).
  bool supported();
  // The mapping granule (the driver's minimum for this GPU; 0 unsupported).
  size_t granularity();
  // A range of `bytes` (rounded up to granules) with nothing mapped; null
  // when unsupported. Throws CudaError when the driver refuses.
  void* reserve(size_t bytes);
  // Maps zeroed memory under every granule [p, p + bytes) touches; false
  // (nothing of it kept) when the GPU's memory cannot be had.
  bool commit(void* p, size_t bytes);
  // Unmaps the granules [p, p + bytes) touched that no other commit holds,
  // after the GPU's queued work (which may still read them) is done.
  void decommit(void* p, size_t bytes) noexcept;
  // Unmaps whatever is still mapped and frees the reservation.
  void release(void* p, size_t bytes) noexcept;
  // Physical memory mapped now, over every range.
  size_t mapped_bytes() const;

 private:
  struct Range {
    size_t size = 0;                // reserved bytes (whole granules)
    std::vector<uint32_t> refs;     // commits holding each granule
    std::vector<uint64_t> handles;  // each granule's CUmemGenericAllocationHandle
  };
  // The range holding [p, p + bytes) (null: none), its base address and the
  // granules [first, last) the bytes touch.
  Range* find(void* p, size_t bytes, uintptr_t& base, size_t& first, size_t& last);
  void unmap_granule(uintptr_t base, Range& r, size_t g) noexcept;

  int device_;
  int probed_ = -1;  // -1 not yet, 0 unsupported, 1 supported
  size_t granularity_ = 0;
  mutable std::mutex mu_;
  std::map<uintptr_t, Range> ranges_;  // by base address
  size_t mapped_ = 0;
};

}  // namespace pagellm::cuda
