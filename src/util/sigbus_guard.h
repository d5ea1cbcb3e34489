// Survives a mapped file shrinking under its mapping. Reading a page of a
// MAP_SHARED mapping that now lies past the end of the file raises SIGBUS,
// which would kill the whole process (every request, not just the ones
// using that file). Ranges watched here are repaired instead: a SIGBUS
// inside one maps zero-filled anonymous pages over the range from the
// faulting page to its end (the read is retried and sees zeros), and marks
// the range damaged. Its owner checks damaged() after using the data and
// throws away what it computed. Faults outside every watched range go to
// the handler that was installed before (by default: the process dies).
//
// The handler calls only mmap(2), a plain system call on Linux; it is
// installed the first time a range is watched.
#pragma once

#include <cstddef>

namespace pagellm {

class SigbusGuard {
 public:
  // Starts watching [base, base + len) (base page-aligned, as mmap returns
  // it). Returns a handle, or -1 when the fixed table of ranges is full (the
  // range is then not watched).
  static int watch(const void* base, size_t len);
  // Stops watching; call before unmapping.
  static void unwatch(int handle);
  // True once a SIGBUS was repaired inside the range (sticky).
  static bool damaged(int handle);
};

}  // namespace pagellm
