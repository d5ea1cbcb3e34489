#include "backend/cuda/vmm_ranges.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "backend/cuda/cuda_check.h"

namespace pagellm::cuda {

namespace {

// The driver's VMM functions, looked up once through the runtime.
struct VmmApi {
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*device_attribute)(int*, CUdevice_attribute, CUdevice) = nullptr;
  CUresult (*granularity)(size_t*, const CUmemAllocationProp*,
                          CUmemAllocationGranularity_flags) = nullptr;
  CUresult (*reserve)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long) = nullptr;
  CUresult (*address_free)(CUdeviceptr, size_t) = nullptr;
  CUresult (*create)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                     unsigned long long) = nullptr;
  CUresult (*release)(CUmemGenericAllocationHandle) = nullptr;
  CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                  unsigned long long) = nullptr;
  CUresult (*unmap)(CUdeviceptr, size_t) = nullptr;
  CUresult (*set_access)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t) = nullptr;
  bool ok = false;
};

template <typename F>
bool lookup(const char* name, F& fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult status{};
  if (cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &status) !=
          cudaSuccess ||
      status != cudaDriverEntryPointSuccess || !p) {
    cudaGetLastError();
    return false;
  }
  fn = reinterpret_cast<F>(p);
  return true;
}

const VmmApi& api() {
  static const VmmApi a = [] {
    VmmApi v;
    v.ok = lookup("cuDeviceGet", v.device_get) &&
           lookup("cuDeviceGetAttribute", v.device_attribute) &&
           lookup("cuMemGetAllocationGranularity", v.granularity) &&
           lookup("cuMemAddressReserve", v.reserve) && lookup("cuMemAddressFree", v.address_free) &&
           lookup("cuMemCreate", v.create) && lookup("cuMemRelease", v.release) &&
           lookup("cuMemMap", v.map) && lookup("cuMemUnmap", v.unmap) &&
           lookup("cuMemSetAccess", v.set_access);
    return v;
  }();
  return a;
}

CUmemAllocationProp device_prop(int device) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}

}  // namespace

VmmRanges::~VmmRanges() {
  while (!ranges_.empty()) {
    auto it = ranges_.begin();
    release(reinterpret_cast<void*>(it->first), it->second.size);
  }
}

bool VmmRanges::supported() {
  std::lock_guard<std::mutex> lock(mu_);
  if (probed_ < 0) {
    probed_ = 0;
    const VmmApi& a = api();
    CUdevice dev = 0;
    int vmm = 0;
    size_t g = 0;
    const CUmemAllocationProp prop = device_prop(device_);
    if (a.ok && a.device_get(&dev, device_) == CUDA_SUCCESS &&
        a.device_attribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev) ==
            CUDA_SUCCESS &&
        vmm && a.granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS && g) {
      granularity_ = g;
      probed_ = 1;
    }
  }
  return probed_ == 1;
}

size_t VmmRanges::granularity() {
  return supported() ? granularity_ : 0;
}

void* VmmRanges::reserve(size_t bytes) {
  if (bytes == 0 || !supported()) return nullptr;
  const size_t g = granularity_;
  const size_t size = (bytes + g - 1) / g * g;
  CUdeviceptr base = 0;
  const CUresult r = api().reserve(&base, size, g, 0, 0);
  if (r != CUDA_SUCCESS)
    throw CudaError(cuda_error_message(fmt::format("cuMemAddressReserve({} bytes)", size), device_,
                                       fmt::format("driver error {}", static_cast<int>(r))),
                    static_cast<int>(r));
  std::lock_guard<std::mutex> lock(mu_);
  Range& range = ranges_[static_cast<uintptr_t>(base)];
  range.size = size;
  range.refs.assign(size / g, 0);
  range.handles.assign(size / g, 0);
  return reinterpret_cast<void*>(base);
}

VmmRanges::Range* VmmRanges::find(void* p, size_t bytes, uintptr_t& base, size_t& first,
                                  size_t& last) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  auto it = ranges_.upper_bound(at);
  if (it == ranges_.begin()) return nullptr;
  --it;
  Range& r = it->second;
  if (at + bytes > it->first + r.size) return nullptr;
  base = it->first;
  first = (at - it->first) / granularity_;
  last = (at - it->first + bytes + granularity_ - 1) / granularity_;
  return &r;
}

void VmmRanges::unmap_granule(uintptr_t base, Range& r, size_t g) noexcept {
  const VmmApi& a = api();
  a.unmap(static_cast<CUdeviceptr>(base + g * granularity_), granularity_);
  a.release(static_cast<CUmemGenericAllocationHandle>(r.handles[g]));
  r.handles[g] = 0;
  mapped_ -= granularity_;
}

bool VmmRanges::commit(void* p, size_t bytes) {
  if (bytes == 0) return true;
  std::lock_guard<std::mutex> lock(mu_);
  uintptr_t base = 0;
  size_t first = 0, last = 0;
  Range* r = find(p, bytes, base, first, last);
  if (!r) return false;
  const VmmApi& a = api();
  const CUmemAllocationProp prop = device_prop(device_);
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  size_t g = first;
  bool ok = true;
  for (; g < last; ++g) {
    if (r->refs[g]++ > 0) continue;
    const CUdeviceptr at = static_cast<CUdeviceptr>(base + g * granularity_);
    CUmemGenericAllocationHandle h = 0;
    ok = a.create(&h, granularity_, &prop, 0) == CUDA_SUCCESS;
    if (ok && (a.map(at, granularity_, 0, h, 0) != CUDA_SUCCESS)) {
      a.release(h);
      ok = false;
    }
    if (ok) {
      r->handles[g] = h;
      mapped_ += granularity_;
      ok = a.set_access(at, granularity_, &access, 1) == CUDA_SUCCESS &&
           cudaMemset(reinterpret_cast<void*>(at), 0, granularity_) == cudaSuccess;
      if (!ok) {
        cudaGetLastError();
        unmap_granule(base, *r, g);
      }
    }
    if (!ok) {
      --r->refs[g];
      break;
    }
  }
  if (ok) {  // the zeros are written before the pool's kernels see the memory
    cudaDeviceSynchronize();
    cudaGetLastError();
    return true;
  }
  // Undo the granules before the failing one.
  for (size_t u = first; u < g; ++u)
    if (--r->refs[u] == 0) unmap_granule(base, *r, u);
  return false;
}

void VmmRanges::decommit(void* p, size_t bytes) noexcept {
  if (bytes == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  uintptr_t base = 0;
  size_t first = 0, last = 0;
  Range* r = find(p, bytes, base, first, last);
  if (!r) return;
  bool synced = false;
  for (size_t g = first; g < last; ++g) {
    if (r->refs[g] == 0 || --r->refs[g] > 0) continue;
    if (!synced) {  // queued kernels may still read it
      cudaDeviceSynchronize();
      cudaGetLastError();
      synced = true;
    }
    unmap_granule(base, *r, g);
  }
}

void VmmRanges::release(void* p, size_t /*bytes*/) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ranges_.find(reinterpret_cast<uintptr_t>(p));
  if (it == ranges_.end()) return;
  cudaDeviceSynchronize();
  cudaGetLastError();
  for (size_t g = 0; g < it->second.refs.size(); ++g)
    if (it->second.handles[g] != 0) unmap_granule(it->first, it->second, g);
  api().address_free(static_cast<CUdeviceptr>(it->first), it->second.size);
  ranges_.erase(it);
}

size_t VmmRanges::mapped_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return mapped_;
}

}  // namespace pagellm::cuda
