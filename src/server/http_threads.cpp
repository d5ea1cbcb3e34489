#include "server/http_threads.h"

namespace pagellm {

ElasticTaskQueue::~ElasticTaskQueue() {
  shutdown();
}

void ElasticTaskQueue::enqueue(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(std::move(fn));
    // Every waiting job needs an idle thread; start one if none is left.
    if (jobs_.size() > idle_ && threads_.size() < max_threads_)
      threads_.emplace_back([this] { worker(); });
  }
  cv_.notify_one();
}

void ElasticTaskQueue::shutdown() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    threads.swap(threads_);
  }
  cv_.notify_all();
  for (auto& t : threads) t.join();
}

size_t ElasticTaskQueue::threads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return threads_.size();
}

void ElasticTaskQueue::worker() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    ++idle_;
    cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
    --idle_;
    if (jobs_.empty()) return;  // stopping, nothing left to run
    auto fn = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    fn();
    lock.lock();
  }
}

}  // namespace pagellm
