#include "util/fault_injector.h"

#include <gtest/gtest.h>

namespace pagellm {
namespace {

TEST(FaultInjector, InertUntilArmed) {
  FaultScope scope;
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(FaultInjector::hit("p", i));
  EXPECT_EQ(FaultInjector::fired("p"), 0);
}

TEST(FaultInjector, SkipTimesAndKey) {
  FaultScope scope;
  FaultInjector::arm("p", {.key = 7, .skip = 2, .times = 2});
  std::vector<bool> got;
  for (int i = 0; i < 6; ++i) {
    EXPECT_FALSE(FaultInjector::hit("p", 3));  // other keys never fire
    EXPECT_FALSE(FaultInjector::hit("q", 7));  // nor other points
    got.push_back(FaultInjector::hit("p", 7));
  }
  EXPECT_EQ(got, (std::vector<bool>{false, false, true, true, false, false}));
  EXPECT_EQ(FaultInjector::fired("p"), 2);
  FaultInjector::disarm("p");
  EXPECT_FALSE(FaultInjector::hit("p", 7));
}

TEST(FaultInjector, ForeverAndAnyKey) {
  FaultScope scope;
  FaultInjector::arm("p", {.times = -1});
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(FaultInjector::hit("p", i));
  FaultInjector::arm("p");  // re-arming resets: fires once
  EXPECT_TRUE(FaultInjector::hit("p"));
  EXPECT_FALSE(FaultInjector::hit("p"));
}

TEST(FaultInjector, ScopeDisarms) {
  {
    FaultScope scope;
    FaultInjector::arm("p", {.times = -1});
  }
  EXPECT_FALSE(FaultInjector::hit("p"));
}

}  // namespace
}  // namespace pagellm
