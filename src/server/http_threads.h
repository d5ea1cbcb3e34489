// The HTTP server's connection threads: a pool that grows on demand, so a
// new connection never waits behind long-running streams while fewer than
// `max_threads` connections are open. Threads are kept once started (idle
// ones wait for the next connection) and joined by shutdown().
#pragma once

#include <httplib.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace pagellm {

class ElasticTaskQueue : public httplib::TaskQueue {
 public:
  explicit ElasticTaskQueue(size_t max_threads) : max_threads_(max_threads) {}
  ~ElasticTaskQueue() override;

  void enqueue(std::function<void()> fn) override;
  void shutdown() override;

  size_t threads() const;

 private:
  void worker();

  const size_t max_threads_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;
  bool stop_ = false;
};

}  // namespace pagellm
