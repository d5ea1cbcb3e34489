// A STREAM-like memory bandwidth probe: the ceiling a bandwidth-bound kernel
// (single-stream decode, which reads every weight once per token) can reach.
//
//   read   every thread sums its share of one buffer (loads only)
//   triad  a[i] = b[i] + s * c[i] over three arrays (two loads, one store;
//          counted as 3 x 8 bytes per element as STREAM does)
//
// Buffers are far larger than the last-level cache; each figure is the best of
// `repeats` passes, in bytes per second.
#pragma once

#include <cstddef>

#include "util/thread_pool.h"

namespace pagellm::cpu {

struct Bandwidth {
  double read_bytes_per_s = 0;
  double triad_bytes_per_s = 0;
  size_t buffer_bytes = 0;  // of the read buffer; each triad array is a third
};

// The read figure alone (what measure_bandwidth reports as read_bytes_per_s).
double measure_read_bandwidth(ThreadPool& pool, size_t buffer_bytes = size_t{384} << 20,
                              int repeats = 5);

// Throws std::bad_alloc if the buffers cannot be allocated.
Bandwidth measure_bandwidth(ThreadPool& pool, size_t buffer_bytes = size_t{384} << 20,
                            int repeats = 5);

}  // namespace pagellm::cpu
