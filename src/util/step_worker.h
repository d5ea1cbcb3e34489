// One background thread that runs one job at a time beside the engine
// thread's forward pass (the grammar masks of the step's samples, the host
// tier's copies of blocks the pool will evict next): start() hands a job
// over, wait() returns when it is done. The thread starts with the first job;
// where none can be had, start() says so and the caller does the work itself.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace pagellm {

class StepWorker {
 public:
  // `niceness` > 0 puts the thread below the forward pass's threads (best
  // effort, Linux): where every core is busy with the pass, the job takes
  // the gaps instead of preempting a pool thread the whole region waits for.
  explicit StepWorker(int niceness = 0) : niceness_(niceness) {}
  ~StepWorker();
  StepWorker(const StepWorker&) = delete;
  StepWorker& operator=(const StepWorker&) = delete;

  // Runs `job` on the worker after the one before it; false (nothing run)
  // when no thread can be had. `job` must not throw.
  bool start(std::function<void()> job);
  // Until the worker is done with what start() gave it (at once if nothing).
  void wait();

 private:
  void loop();

  int niceness_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> job_;
  bool busy_ = false;  // job_ handed over and not finished
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace pagellm
