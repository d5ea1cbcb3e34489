// The CPU causal depthwise conv against float64, and its bits: the same
// whatever the runs a sequence comes in (1 token, fewer than kernel - 1, all
// at once), the batch, or the instruction-set variant.
#include "backend/cpu/ssm_conv.h"

#include <gtest/gtest.h>

#include "kernel_test_util.h"
#include "recurrent_test_util.h"
#include "util/error.h"

namespace pagellm {
namespace {

using cpu::CpuIsa;
using test::SeqLayout;

struct ConvCase {
  int channels, kernel;
  int64_t rows;
  std::vector<float> x, weight, bias;
};

ConvCase random_case(int channels, int kernel, int64_t rows, uint64_t seed) {
  return {channels, kernel, rows, test::random_floats(static_cast<size_t>(rows * channels), seed),
          test::random_floats(static_cast<size_t>(channels * kernel), seed + 1, 0.5f),
          test::random_floats(static_cast<size_t>(channels), seed + 2, 0.1f)};
}

SsmConvArgs conv_args(const ConvCase& c, const float* x, float* y, float* states, bool silu,
                      bool bias) {
  SsmConvArgs a;
  a.x = x;
  a.x_stride = c.channels;
  a.y = y;
  a.y_stride = c.channels;
  a.weight = c.weight.data();
  a.bias = bias ? c.bias.data() : nullptr;
  a.states = states;
  a.state_stride = static_cast<int64_t>(c.kernel - 1) * c.channels;
  a.channels = c.channels;
  a.kernel = c.kernel;
  a.silu = silu;
  return a;
}

// One sequence from a zero state in calls of the given sizes (then the rest).
std::pair<std::vector<float>, std::vector<float>> run_split(const ConvCase& c,
                                                            const std::vector<int64_t>& sizes,
                                                            bool silu, bool bias, CpuIsa isa,
                                                            ThreadPool& pool) {
  std::vector<float> y(c.x.size()), state(static_cast<size_t>((c.kernel - 1) * c.channels));
  int64_t done = 0;
  for (size_t i = 0; done < c.rows; ++i) {
    const int64_t n = i < sizes.size() ? std::min(sizes[i], c.rows - done) : c.rows - done;
    SeqLayout lay;
    lay.add(static_cast<int32_t>(n), 0, static_cast<int32_t>(done));
    ssm_conv(conv_args(c, c.x.data() + done * c.channels, y.data() + done * c.channels,
                       state.data(), silu, bias),
             lay.batch(), pool, isa);
    done += n;
  }
  return {y, state};
}

TEST(SsmConv, MatchesFloat64AndEverySplitAndIsaGivesTheSameBits) {
  ThreadPool pool(2);
  for (auto [channels, kernel] : {std::pair{48, 4}, std::pair{600, 4}, std::pair{37, 3},
                                  std::pair{20, 1}}) {
    const ConvCase c = random_case(channels, kernel, 41, channels + kernel);
    for (bool silu : {true, false}) {
      const bool bias = !silu;
      const auto whole = run_split(c, {}, silu, bias, CpuIsa::Scalar, pool);
      std::vector<double> hist(static_cast<size_t>((kernel - 1) * channels)), want;
      test::reference_ssm_conv(c.x.data(), c.rows, channels, kernel, c.weight,
                               bias ? c.bias.data() : nullptr, silu, hist, want);
      EXPECT_LT(test::rel_diff(whole.first.data(), want.data(), want.size()), 1e-6);
      EXPECT_LT(test::rel_diff(whole.second.data(), hist.data(), hist.size()), 1e-12);
      for (CpuIsa isa : cpu::available_isas())
        for (const std::vector<int64_t>& cuts :
             {std::vector<int64_t>{}, std::vector<int64_t>(41, 1), std::vector<int64_t>{2, 1, 5},
              std::vector<int64_t>{3, 3, 1, 30}}) {
          const auto r = run_split(c, cuts, silu, bias, isa, pool);
          EXPECT_EQ(r.first, whole.first) << cpu::isa_name(isa) << " C " << channels;
          EXPECT_EQ(r.second, whole.second) << cpu::isa_name(isa) << " C " << channels;
        }
    }
  }
}

TEST(SsmConv, SequencesInOneBatchAreIndependent) {
  ThreadPool pool(2);
  const ConvCase c = random_case(300, 4, 10, 9);  // rows: seq A 7, seq B 1, seq C 2
  const int64_t sf = 3 * c.channels;
  std::vector<float> states = test::random_floats(static_cast<size_t>(3 * sf), 4);
  const std::vector<float> start = states;
  SeqLayout lay;
  lay.add(7, 2, 5);
  lay.add(1, 0, 100);
  lay.add(2, 1, 0);
  std::vector<float> y(c.x.size());
  ssm_conv(conv_args(c, c.x.data(), y.data(), states.data(), true, true), lay.batch(), pool);
  for (int s = 0; s < 3; ++s) {
    const int32_t r0 = lay.begin[s], n = lay.begin[s + 1] - r0, slot = lay.slot[s];
    std::vector<float> st(start.begin() + slot * sf, start.begin() + (slot + 1) * sf),
        ys(static_cast<size_t>(n * c.channels));
    SeqLayout one;
    one.add(n, 0, 0);
    ssm_conv(conv_args(c, c.x.data() + r0 * c.channels, ys.data(), st.data(), true, true),
             one.batch(), pool);
    EXPECT_EQ(ys, std::vector<float>(y.begin() + r0 * c.channels,
                                     y.begin() + (r0 + n) * c.channels));
    EXPECT_EQ(st, std::vector<float>(states.begin() + slot * sf, states.begin() + (slot + 1) * sf));
  }
}

TEST(SsmConv, RejectsInconsistentArguments) {
  ThreadPool pool(1);
  const ConvCase c = random_case(8, 4, 2, 1);
  std::vector<float> y(c.x.size()), state(24);
  SeqLayout lay;
  lay.add(2, 0, 0);
  SsmConvArgs a = conv_args(c, c.x.data(), y.data(), state.data(), true, false);
  a.state_stride = 10;
  EXPECT_THROW(ssm_conv(a, lay.batch(), pool), Error);
  a = conv_args(c, c.x.data(), y.data(), state.data(), true, false);
  a.kernel = 0;
  EXPECT_THROW(ssm_conv(a, lay.batch(), pool), Error);
}

}  // namespace
}  // namespace pagellm
