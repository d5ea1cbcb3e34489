// Named fault points for tests. Production code asks `FaultInjector::hit`
// at a few places where a failure can really happen (an allocation, a step
// of one request); a test arms a point to make it fail there, on purpose,
// and checks that the failure reaches only the request it belongs to.
//
//   if (FaultInjector::hit("kv.reserve", seq_id)) throw std::bad_alloc();
//
// Always compiled in, inert unless armed: while nothing is armed, hit() is
// one relaxed atomic load. Points in use:
//   "kv.reserve"      KV block reservation of one sequence (key: sequence id)
//   "model.workspace" the forward pass growing its activation buffers
//   "engine.sample"   sampling one token of a request (key: request id)
//   "engine.verify"   verifying one drafted token of a request (key: request id)
//   "disk.write"      the disk tier writing a block file (a full disk: ENOSPC)
//   "disk.read"       the disk tier reading a block file (a short read)
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "util/error.h"

namespace pagellm {

// What an armed point throws where no more specific exception fits.
class InjectedFault : public Error {
 public:
  using Error::Error;
};

class FaultInjector {
 public:
  static constexpr int64_t kAnyKey = -1;
  struct Spec {
    int64_t key = kAnyKey;  // fire only for this key (kAnyKey: for every key)
    int64_t skip = 0;       // let this many matching hits pass first
    int64_t times = 1;      // then fire this many times (-1: for ever)
  };

  // Arms `point` (replacing an earlier arming of it).
  static void arm(const std::string& point, Spec spec);
  static void arm(const std::string& point) { arm(point, Spec{}); }
  static void disarm(const std::string& point);
  static void disarm_all();
  // Times `point` fired since it was armed.
  static int64_t fired(const std::string& point);

  // True when the armed point `point` fails now for `key`.
  static bool hit(const char* point, int64_t key = kAnyKey) {
    if (armed_.load(std::memory_order_relaxed) == 0) return false;
    return hit_slow(point, key);
  }

 private:
  static bool hit_slow(const char* point, int64_t key);
  static std::atomic<int> armed_;
};

// Disarms every point when a test scope ends.
struct FaultScope {
  FaultScope() = default;
  ~FaultScope() { FaultInjector::disarm_all(); }
  FaultScope(const FaultScope&) = delete;
  FaultScope& operator=(const FaultScope&) = delete;
};

}  // namespace pagellm
