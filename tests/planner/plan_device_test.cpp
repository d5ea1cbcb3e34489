// measure_devices for split GPUs (one GPU declared more than once): the parts
// share the GPU's free memory and one headroom.
#include "planner/plan_device.h"

#include <gtest/gtest.h>

#include "planner_fixtures.h"
#include "util/error.h"

namespace pagellm {
namespace {

using namespace test;

// The parts of cuda:`gpu` in `devs`, in part order.
std::vector<PlanDevice> parts_of(const std::vector<PlanDevice>& devs, int32_t gpu) {
  std::vector<PlanDevice> out;
  for (const auto& d : devs)
    if (d.device.kind == DeviceKind::kCuda && d.device.physical_index() == gpu) out.push_back(d);
  std::sort(out.begin(), out.end(),
            [](const PlanDevice& a, const PlanDevice& b) { return a.device.part < b.device.part; });
  return out;
}

// What must hold for the parts of one GPU with `gpu_free` bytes free and
// `headroom` (the one headroom of the whole GPU): each part within its size,
// the parts' free memory within the GPU's, the parts' budgets together within
// the GPU's free memory minus one headroom.
void expect_shared(const std::vector<PlanDevice>& parts, uint64_t gpu_free, uint64_t headroom) {
  uint64_t free_sum = 0, headroom_sum = 0, budget_sum = 0;
  for (size_t k = 0; k < parts.size(); ++k) {
    const PlanDevice& p = parts[k];
    EXPECT_EQ(p.device.part, static_cast<int32_t>(k));
    if (p.device.memory_cap) {
      EXPECT_LE(p.free_bytes, *p.device.memory_cap) << p.device.name();
    }
    free_sum += p.free_bytes;
    headroom_sum += p.headroom_bytes;
    budget_sum += p.budget_bytes();
  }
  EXPECT_LE(free_sum, gpu_free);
  EXPECT_GE(headroom_sum, headroom);                 // at least one headroom...
  EXPECT_LE(headroom_sum, headroom + parts.size());  // ...and one, up to rounding
  EXPECT_LE(budget_sum + headroom, std::max(gpu_free, headroom));
}

FakeProbe gpu_machine(std::vector<uint64_t> gpu_free) {
  FakeProbe probe = FakeProbe::with_host(64 * kGiB);
  for (uint64_t f : gpu_free) probe.gpus.push_back({80 * kGiB, f});
  return probe;
}

TEST(MeasureDevices, SplitGpuPartsShareItsMemory) {
  FakeProbe probe = gpu_machine({80 * kGiB});
  const auto devs = measure_devices(parse_devices({"cuda:0=40GiB", "cuda:0=20GiB"}), probe);
  ASSERT_EQ(devs.size(), 3u);
  EXPECT_EQ(devs[0].device.name(), "cuda:0");
  EXPECT_EQ(devs[1].device.name(), "cuda:0.1");
  EXPECT_TRUE(devs[2].device.is_host());
  // The sizes fit on the GPU: each part has its size.
  EXPECT_EQ(devs[0].free_bytes, 40 * kGiB);
  EXPECT_EQ(devs[1].free_bytes, 20 * kGiB);
  // One headroom, that of a GPU with the parts' 60 GiB, split between them.
  const uint64_t h = default_headroom(devs[0].device, 60 * kGiB);
  expect_shared(parts_of(devs, 0), 80 * kGiB, h);
  EXPECT_GT(devs[0].headroom_bytes, devs[1].headroom_bytes);
  // With 5% of each part above the 512 MiB floor, each part keeps what a GPU
  // declared once with its size would.
  for (uint64_t size : {40 * kGiB, 20 * kGiB}) {
    FakeProbe alone = gpu_machine({80 * kGiB});
    const auto one = measure_devices({Device{DeviceKind::kCuda, 0, size}}, alone);
    const PlanDevice& part = size == 40 * kGiB ? devs[0] : devs[1];
    EXPECT_EQ(part.budget_bytes(), one[0].budget_bytes()) << part.device.name();
  }
  // The host is measured as ever.
  EXPECT_EQ(devs[2].free_bytes, 64 * kGiB);
}

TEST(MeasureDevices, SplitGpuSizesBeyondItsFreeMemoryAreClamped) {
  // 50 GiB free for 40 + 20 GiB: the second part gets what the first left.
  FakeProbe probe = gpu_machine({50 * kGiB});
  auto devs = measure_devices(parse_devices({"cuda:0=40GiB", "cuda:0=20GiB"}), probe);
  auto parts = parts_of(devs, 0);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].free_bytes, 40 * kGiB);
  EXPECT_EQ(parts[1].free_bytes, 10 * kGiB);
  expect_shared(parts, 50 * kGiB, default_headroom(parts[0].device, 50 * kGiB));
  // 30 GiB free for 40 + 20 + 10 GiB: the later parts get nothing.
  probe = gpu_machine({30 * kGiB});
  devs = measure_devices(parse_devices({"cuda:0=40GiB", "cuda:0=20GiB", "cuda:0=10GiB"}), probe);
  parts = parts_of(devs, 0);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].free_bytes, 30 * kGiB);
  EXPECT_EQ(parts[1].budget_bytes(), 0u);
  EXPECT_EQ(parts[2].budget_bytes(), 0u);
  expect_shared(parts, 30 * kGiB, default_headroom(parts[0].device, 30 * kGiB));
  // A GPU smaller than the headroom leaves nothing to any part.
  probe = gpu_machine({256 * kMiB});
  devs = measure_devices(parse_devices({"cuda:0=1GiB", "cuda:0=1GiB"}), probe);
  parts = parts_of(devs, 0);
  expect_shared(parts, 256 * kMiB, default_headroom(parts[0].device, 256 * kMiB));
  for (const auto& p : parts) EXPECT_EQ(p.budget_bytes(), 0u) << p.device.name();
}

TEST(MeasureDevices, SplitGpuHeadroomFlagCountsOnce) {
  FakeProbe probe = gpu_machine({80 * kGiB, 24 * kGiB});
  const auto devs = measure_devices(
      parse_devices({"cuda:0=40GiB", "cuda:1", "cuda:0=20GiB", "cpu:0=2GiB"}), probe, kGiB);
  ASSERT_EQ(devs.size(), 5u);
  expect_shared(parts_of(devs, 0), 80 * kGiB, kGiB);
  // The other devices each keep the whole --headroom.
  const auto gpu1 = parts_of(devs, 1);
  ASSERT_EQ(gpu1.size(), 1u);
  EXPECT_EQ(gpu1[0].free_bytes, 24 * kGiB);
  EXPECT_EQ(gpu1[0].headroom_bytes, kGiB);
  for (const auto& d : devs) {
    if (d.device.kind == DeviceKind::kCpu) {
      EXPECT_EQ(d.headroom_bytes, kGiB) << d.device.name();
    }
  }
}

TEST(MeasureDevices, SplitMissingGpuOrPartDeclaredTwiceIsAnError) {
  FakeProbe probe = gpu_machine({80 * kGiB});
  EXPECT_THROW(measure_devices(parse_devices({"cuda:1=1GiB", "cuda:1=1GiB"}), probe), ConfigError);
  const Device part1{DeviceKind::kCuda, 0, kGiB, 1};
  try {
    measure_devices({Device{DeviceKind::kCuda, 0, kGiB}, part1, part1}, probe);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "device cuda:0.1 is declared twice");
  }
}

}  // namespace
}  // namespace pagellm
