#include "util/sigbus_guard.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <mutex>

namespace pagellm {

namespace {

constexpr int kSlots = 64;

struct Slot {
  std::atomic<uintptr_t> base{0};  // 0: free
  std::atomic<size_t> len{0};
  std::atomic<bool> damaged{false};
};

Slot g_slots[kSlots];
std::mutex g_mu;  // watch/unwatch only; the handler reads the atomics
struct sigaction g_previous {};
uintptr_t g_page = 4096;

void on_sigbus(int sig, siginfo_t* info, void* ctx) {
  const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  for (Slot& s : g_slots) {
    const uintptr_t base = s.base.load(std::memory_order_acquire);
    const size_t len = s.len.load(std::memory_order_acquire);
    if (base == 0 || addr < base || addr >= base + len) continue;
    const uintptr_t page = addr & ~(g_page - 1);
    void* p = ::mmap(reinterpret_cast<void*>(page), base + len - page, PROT_READ,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (p == MAP_FAILED) break;  // cannot repair: treat as not ours
    s.damaged.store(true, std::memory_order_release);
    return;  // the faulting read runs again and sees zeros
  }
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction) {
      g_previous.sa_sigaction(sig, info, ctx);
      return;
    }
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
    return;
  }
  // Default action: restore it; the faulting access runs again and ends the process.
  ::signal(sig, SIG_DFL);
}

void install() {
  g_page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  struct sigaction sa {};
  sa.sa_sigaction = on_sigbus;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGBUS, &sa, &g_previous);
}

}  // namespace

int SigbusGuard::watch(const void* base, size_t len) {
  static std::once_flag once;
  std::call_once(once, install);
  std::lock_guard<std::mutex> lock(g_mu);
  for (int i = 0; i < kSlots; ++i) {
    Slot& s = g_slots[i];
    if (s.base.load(std::memory_order_relaxed) != 0) continue;
    s.damaged.store(false, std::memory_order_relaxed);
    s.len.store(len, std::memory_order_release);
    s.base.store(reinterpret_cast<uintptr_t>(base), std::memory_order_release);
    return i;
  }
  return -1;
}

void SigbusGuard::unwatch(int handle) {
  if (handle < 0 || handle >= kSlots) return;
  std::lock_guard<std::mutex> lock(g_mu);
  g_slots[handle].base.store(0, std::memory_order_release);
  g_slots[handle].len.store(0, std::memory_order_release);
}

bool SigbusGuard::damaged(int handle) {
  if (handle < 0 || handle >= kSlots) return false;
  return g_slots[handle].damaged.load(std::memory_order_acquire);
}

}  // namespace pagellm
