// The planner keeps layers off devices whose kernels do not run their weight
// types (PlanDevice::missing_weight_kernels, which measure_devices fills from
// device_runs_weight_type). Today's CUDA kernels run every weight type the CPU
// does, so most tests here declare a GPU without Q3_K / Q5_0 / IQ4_XS kernels,
// as an older build or a new type would be.
#include <gtest/gtest.h>

#include <string>

#include "planner/plan_format.h"
#include "planner/planner_fixtures.h"

namespace pagellm {
namespace {

using namespace test;

// 8 layers of 64 MiB: Q4_K matrices and F32 norms, layer 5 Q3_K; a Q6_K output.
ModelFootprint mixed_model() {
  ModelFootprint fp = synth_model(8, 64 * kMiB, 32 * kKiB);
  fp.layer_types.assign(8, {DType::Q4_K, DType::F32});
  fp.layer_types[5] = {DType::F32, DType::Q3_K};
  fp.output_type = DType::Q6_K;
  return fp;
}

PlanDevice limited_gpu(int32_t i, uint64_t free) {
  PlanDevice d = gpu(i, free);
  d.missing_weight_kernels = {DType::Q3_K, DType::Q5_0, DType::IQ4_XS};
  return d;
}

TEST(PlannerKernels, LayersTheGpuCannotRunStayOnTheHost) {
  const ModelFootprint fp = mixed_model();
  const std::vector<PlanDevice> devs = {limited_gpu(0, 16 * kGiB), host(64 * kGiB)};
  const Plan p = make_plan(request(1024, 4), fp, devs);
  // Room for every layer on the GPU, but layer 5 cannot run there: the GPU
  // takes the contiguous layers before it, the host the rest.
  EXPECT_EQ(p.device_map(), "0-4:cuda:0,5-7:host");
  EXPECT_EQ(p.kernel_note, "cuda:0 does not run q3_k");
  EXPECT_NE(format_plan_table(p).find("weight types: cuda:0 does not run q3_k"), std::string::npos);
  // Without the Q3_K layer the whole model goes to the GPU.
  ModelFootprint all_k = fp;
  all_k.layer_types[5] = {DType::Q4_K, DType::F32};
  const Plan q = make_plan(request(1024, 4), all_k, devs);
  EXPECT_EQ(q.device_map(), "0-7:cuda:0");
  EXPECT_EQ(q.kernel_note, "");
}

TEST(PlannerKernels, TheOutputTypeKeepsTheLastLayerOffTheGpu) {
  ModelFootprint fp = mixed_model();
  fp.layer_types[5] = {DType::Q4_K, DType::F32};
  fp.output_type = DType::Q5_0;  // the projection goes with the last layer
  const Plan p = make_plan(request(1024, 4), fp, {limited_gpu(0, 16 * kGiB), host(64 * kGiB)});
  EXPECT_EQ(p.device_map(), "0-6:cuda:0,7:host");
  EXPECT_EQ(p.kernel_note, "cuda:0 does not run q5_0");
}

TEST(PlannerKernels, VirtualCpuDevicesRunEveryType) {
  const Plan p = make_plan(request(1024, 4), mixed_model(), {vcpu(0, 8 * kGiB), host(64 * kGiB)});
  EXPECT_EQ(p.device_map(), "0-7:cpu:0");
  EXPECT_EQ(p.kernel_note, "");
}

TEST(PlannerKernels, ManualMapAndNoCpuOffloadRefuseWithTheLayerAndType) {
  const ModelFootprint fp = mixed_model();
  const std::vector<PlanDevice> devs = {limited_gpu(0, 16 * kGiB), host(64 * kGiB)};
  PlanRequest req = request(1024, 4);
  req.device_map = parse_device_map("0-7:cuda:0");
  EXPECT_EQ(config_error(req, fp, devs),
            "--device-map puts layer 5 on cuda:0, whose kernels do not run q3_k weights");
  req.device_map = parse_device_map("0-4:cuda:0,5-7:host");
  EXPECT_EQ(make_plan(req, fp, devs).device_map(), "0-4:cuda:0,5-7:host");
  ModelFootprint out = fp;
  out.layer_types[5] = {DType::Q4_K};
  out.output_type = DType::IQ4_XS;
  req.device_map = parse_device_map("0-7:cuda:0");
  EXPECT_EQ(config_error(req, out, devs),
            "--device-map puts the output projection (with the last layer) on cuda:0, whose "
            "kernels do not run iq4_xs weights");
  req.device_map.reset();
  req.no_cpu_offload = true;
  EXPECT_EQ(config_error(req, fp, devs),
            "--no-cpu-offload: layer 5 has q3_k weights, which only the host's kernels run");
  EXPECT_EQ(config_error(req, out, devs),
            "--no-cpu-offload: the output projection has iq4_xs weights, which only the host's "
            "kernels run");
  // A virtual CPU device next to the GPU can take what the GPU cannot.
  EXPECT_EQ(config_error(req, fp, {limited_gpu(0, 16 * kGiB), vcpu(0, 8 * kGiB), host(64 * kGiB)}),
            "no error");
}

// When the host is then too small, the refusal says why the GPU's room went
// unused.
TEST(PlannerKernels, RefusalNamesTheTypesAGpuLacks) {
  ModelFootprint fp = mixed_model();
  fp.layer_types[0] = {DType::Q3_K};  // nothing can go to the GPU
  try {
    make_plan(request(1024, 4), fp, {limited_gpu(0, 16 * kGiB), host(256 * kMiB)});
    FAIL() << "expected a refusal";
  } catch (const PlanError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("(weight types: cuda:0 does not run q3_k: layers with them stay off it)"),
              std::string::npos)
        << msg;
  }
}

TEST(PlannerKernels, MeasuredDevicesListWhatTheirKernelsLack) {
  FakeProbe probe = FakeProbe::with_host(64 * kGiB);
  probe.gpus = {{24 * kGiB, 24 * kGiB}};
  const std::vector<PlanDevice> devs =
      measure_devices({Device{DeviceKind::kCpu, 0, 8 * kGiB}}, probe);
  ASSERT_EQ(devs.size(), 2u);
  for (const PlanDevice& d : devs) EXPECT_TRUE(d.missing_weight_kernels.empty()) << d.device.name();
  const std::vector<PlanDevice> gpus = measure_devices({}, probe);
  ASSERT_EQ(gpus.size(), 2u);
  ASSERT_EQ(gpus[0].device.kind, DeviceKind::kCuda);
  for (DType t : all_dtypes())
    EXPECT_EQ(gpus[0].runs_weight_type(t), device_runs_weight_type(DeviceKind::kCuda, t))
        << dtype_name(t);
  // The Q8 activation formats are no weight type of the GPU's; every GGUF
  // weight type the CPU runs is.
  EXPECT_FALSE(gpus[0].runs_weight_type(DType::Q8_K));
  for (DType t : {DType::Q2_K, DType::Q3_K, DType::Q5_0, DType::IQ4_NL, DType::IQ4_XS,
                  DType::MXFP4})
    EXPECT_TRUE(gpus[0].runs_weight_type(t)) << dtype_name(t);
  // So a model of those types plans entirely onto an unlimited GPU.
  EXPECT_EQ(make_plan(request(1024, 4), mixed_model(), gpus).device_map(), "0-7:cuda:0");
}

TEST(PlannerKernels, PlansTheSameWithoutTypeInformation) {
  // A footprint without layer types (hand-built, as older callers make) puts
  // no constraint on the placement.
  ModelFootprint fp = mixed_model();
  fp.layer_types.clear();
  fp.output_type = DType::F32;
  const Plan p = make_plan(request(1024, 4), fp, {limited_gpu(0, 16 * kGiB), host(64 * kGiB)});
  EXPECT_EQ(p.device_map(), "0-7:cuda:0");
}

}  // namespace
}  // namespace pagellm
