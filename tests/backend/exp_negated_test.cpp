// exp_negated against the exact value (long double exp), for every variant
// this CPU runs (the emulated suites run the Scalar and Avx2 ones too).
#include "backend/exp_negated.h"

#include "backend/cpu/cpu_isa.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace pagellm::cpu {
namespace {

// |got - exact| in units of the last place of the double nearest `exact`.
double ulps(double got, long double exact) {
  const double nearest = static_cast<double>(exact);
  const double ulp = std::nextafter(nearest, std::numeric_limits<double>::infinity()) - nearest;
  return static_cast<double>(std::fabs(static_cast<long double>(got) - exact) / ulp);
}

std::vector<double> inputs() {
  std::vector<double> x = {0.0,  -0.0,  1e-300, 1e-17, 0.5,  1.0,    2.0,
                           10.0, 100.0, 700.0,  708.0, -1.0, -100.0, -700.0};
  // Either side of the range-reduction boundaries (k + 1/2) ln2.
  for (int k = 0; k < 1021; k += 17)
    for (double d : {-1e-12, 0.0, 1e-12}) x.push_back((k + 0.5) * std::log(2.0) + d);
  std::mt19937_64 gen(5);
  std::uniform_real_distribution<double> wide(0.0, 708.0), near(0.0, 40.0);
  for (int i = 0; i < 4000; ++i) x.push_back(i % 2 ? wide(gen) : near(gen));
  return x;
}

TEST(ExpNegated, WithinTwoUlpOfTheExactValue) {
  const std::vector<double> x = inputs();
  for (CpuIsa isa : available_isas()) {
    std::vector<double> y(x.size());
    exp_negated(x.data(), y.data(), x.size(), isa);
    double worst = 0.0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double e = ulps(y[i], std::exp(-static_cast<long double>(x[i])));
      worst = std::max(worst, e);
      ASSERT_LE(e, 2.0) << isa_name(isa) << " x " << x[i] << " got " << y[i];
    }
    RecordProperty(std::string("worst_ulp_") + isa_name(isa), std::to_string(worst));
  }
}

TEST(ExpNegated, PastTheRangeAndInfinityGiveZero) {
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> x = {708.0001, 709.0, 745.2, 1e6, 1e300, inf};
  for (CpuIsa isa : available_isas()) {
    std::vector<double> y(x.size(), -1.0);
    exp_negated(x.data(), y.data(), x.size(), isa);
    for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], 0.0) << isa_name(isa) << " " << x[i];
  }
}

// A value's result is the same bits at any offset and any length (the vector
// tail included), and in place.
TEST(ExpNegated, ResultIndependentOfPositionAndLength) {
  const std::vector<double> x = inputs();
  for (CpuIsa isa : available_isas()) {
    std::vector<double> whole(x.size());
    exp_negated(x.data(), whole.data(), x.size(), isa);
    for (size_t start : {0, 1, 2, 3, 5}) {
      for (size_t n = 0; n <= 9; ++n) {
        std::vector<double> y(n + 1, -1.0);
        exp_negated(x.data() + start, y.data(), n, isa);
        for (size_t i = 0; i < n; ++i)
          ASSERT_EQ(std::memcmp(&y[i], &whole[start + i], sizeof(double)), 0)
              << isa_name(isa) << " start " << start << " n " << n << " i " << i;
        EXPECT_EQ(y[n], -1.0) << "wrote past the end: " << isa_name(isa) << " n " << n;
      }
    }
    std::vector<double> in_place = x;
    exp_negated(in_place.data(), in_place.data(), in_place.size(), isa);
    EXPECT_EQ(std::memcmp(in_place.data(), whole.data(), whole.size() * sizeof(double)), 0);
  }
}

}  // namespace
}  // namespace pagellm::cpu
