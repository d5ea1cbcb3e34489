#include "util/fault_injector.h"

#include <map>
#include <mutex>

namespace pagellm {

namespace {

struct Armed {
  FaultInjector::Spec spec;
  int64_t seen = 0;   // matching hits so far
  int64_t fired = 0;  // of those, the ones that failed
};

std::mutex& mu() {
  static std::mutex m;
  return m;
}

std::map<std::string, Armed, std::less<>>& points() {
  static std::map<std::string, Armed, std::less<>> p;
  return p;
}

}  // namespace

std::atomic<int> FaultInjector::armed_{0};

void FaultInjector::arm(const std::string& point, Spec spec) {
  std::lock_guard<std::mutex> lock(mu());
  points()[point] = Armed{spec, 0, 0};
  armed_.store(static_cast<int>(points().size()), std::memory_order_relaxed);
}

void FaultInjector::disarm(const std::string& point) {
  std::lock_guard<std::mutex> lock(mu());
  points().erase(point);
  armed_.store(static_cast<int>(points().size()), std::memory_order_relaxed);
}

void FaultInjector::disarm_all() {
  std::lock_guard<std::mutex> lock(mu());
  points().clear();
  armed_.store(0, std::memory_order_relaxed);
}

int64_t FaultInjector::fired(const std::string& point) {
  std::lock_guard<std::mutex> lock(mu());
  auto it = points().find(point);
  return it == points().end() ? 0 : it->second.fired;
}

bool FaultInjector::hit_slow(const char* point, int64_t key) {
  std::lock_guard<std::mutex> lock(mu());
  auto it = points().find(std::string_view(point));
  if (it == points().end()) return false;
  Armed& a = it->second;
  if (a.spec.key != kAnyKey && a.spec.key != key) return false;
  if (a.seen++ < a.spec.skip) return false;
  if (a.spec.times >= 0 && a.fired >= a.spec.times) return false;
  ++a.fired;
  return true;
}

}  // namespace pagellm
