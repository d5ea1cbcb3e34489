#include "engine/mask_prefetch.h"

#include <system_error>

#ifdef __linux__
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "engine/sample_output.h"

namespace pagellm {

MaskPrefetcher::~MaskPrefetcher() {
  if (!worker_.joinable()) return;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();  // after finishing a job it holds
}

void MaskPrefetcher::start(std::vector<SampleOutput*> outs) {
  if (outs.empty()) return;
  wait();  // (the engine always has: one job at a time)
  if (!worker_.joinable()) {
    try {
      worker_ = std::thread([this] { loop(); });
    } catch (const std::system_error&) {
      return;  // no thread: the draws compute their own masks
    }
  }
  {
    std::lock_guard lock(mu_);
    job_ = std::move(outs);
    busy_ = true;
  }
  cv_.notify_all();
}

void MaskPrefetcher::wait() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return !busy_; });
}

void MaskPrefetcher::loop() {
#ifdef __linux__
  // Below the forward pass's threads: where the cores are all busy with it
  // (as many pool threads as cores), the masks take the gaps, and the rest
  // once the engine thread waits for them, instead of preempting a pool
  // thread that the whole parallel region then waits for. Best effort.
  (void)setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), 10);
#endif
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return busy_ || stop_; });
    if (busy_) {
      std::vector<SampleOutput*> job = std::move(job_);
      lock.unlock();
      for (SampleOutput* out : job) out->prepare_mask();  // noexcept: errors stay in `out`
      lock.lock();
      busy_ = false;
      cv_.notify_all();
      continue;
    }
    if (stop_) return;
  }
}

}  // namespace pagellm
