#include "util/step_worker.h"

#include <system_error>

#ifdef __linux__
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace pagellm {

StepWorker::~StepWorker() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();  // after finishing a job it holds
}

bool StepWorker::start(std::function<void()> job) {
  wait();  // one job at a time
  if (!thread_.joinable()) {
    try {
      thread_ = std::thread([this] { loop(); });
    } catch (const std::system_error&) {
      return false;
    }
  }
  {
    std::lock_guard lock(mu_);
    job_ = std::move(job);
    busy_ = true;
  }
  cv_.notify_all();
  return true;
}

void StepWorker::wait() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return !busy_; });
}

void StepWorker::loop() {
#ifdef __linux__
  if (niceness_ > 0)
    (void)setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), niceness_);
#endif
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return busy_ || stop_; });
    if (busy_) {
      std::function<void()> job = std::move(job_);
      lock.unlock();
      job();
      lock.lock();
      busy_ = false;
      cv_.notify_all();
      continue;
    }
    if (stop_) return;
  }
}

}  // namespace pagellm
