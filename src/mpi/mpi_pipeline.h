// Pipeline-parallel inference over MPI: rank 0 runs the engine and the first
// layers; every other rank holds a contiguous range of later layers and
// their KV pools and serves steps: it receives a step (mpi/step_message.h)
// from the rank before it, runs its layers, and passes the hidden state on;
// the last rank sends the logits back to rank 0. Without MPI in the build, or
// when the process was not started by an MPI launcher, there is one rank and
// nothing here does anything.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "mpi/step_message.h"
#include "kvcache/kv_cache_storage.h"
#include "model/pipeline_link.h"
#include "model/runner.h"
#include "util/thread_pool.h"

namespace pagellm {

// Starts MPI when the process runs under an MPI launcher (mpirun, srun);
// call once from main. Stops it at exit.
void mpi_start(int* argc, char*** argv);
bool mpi_built();
int mpi_rank();  // 0 without MPI
int mpi_size();  // 1 without MPI
// Rank 0's `bytes` on every rank.
void mpi_broadcast(std::vector<uint8_t>& bytes);
// Every rank's `bytes`, on rank 0 (empty elsewhere).
std::vector<std::vector<uint8_t>> mpi_gather(const std::vector<uint8_t>& bytes);
// Ends this process: finalizes MPI first (status 0 or 2, which every rank
// reaches together, or any status after mpi_failing_together()), else aborts
// the job so that no rank waits for ever.
[[noreturn]] void mpi_exit(int code);
// The error being thrown is one every rank meets on the same data (a
// refusal after the ranks exchanged what they have): they end together, so
// that rank 0's message is not cut short by another rank's abort.
void mpi_failing_together();

// Rank 0's link to ranks 1.. (ModelRunner::set_pipeline_link). A stage that
// fails sends its error back; one that does not answer within `timeout` ends
// the step with an error naming it, and the link is then broken: every later
// step fails at once (broken() tells the command to exit non-zero).
class MpiPipelineLink final : public PipelineLink {
 public:
  // `micro_batches` > 1: a step of several sequences goes down the pipeline
  // in that many parts, so that the ranks work on different parts at once.
  MpiPipelineLink(StepLimits limits, std::chrono::milliseconds timeout, int32_t micro_batches = 1);
  ~MpiPipelineLink() override;  // shuts the other ranks down
  std::span<const float> forward_rest(const Batch& batch, std::span<const float> hidden) override;
  int32_t micro_batches() const override { return micro_batches_; }
  void send(const Batch& batch, std::span<const float> hidden) override;
  std::span<const float> receive(const Batch& batch) override;
  // Readable from any thread (a watcher ends `serve` when the link breaks).
  bool broken() const { return broken_flag_.load(); }
  // From any thread: a step waiting for the other ranks ends now with an
  // error and the link is broken (the job is being torn down, e.g. mpirun
  // stops every rank after one died).
  void interrupt() { interrupted_ = true; }
  // Milliseconds the current step has waited for the other ranks (0: none waiting).
  int64_t waiting_ms() const;
  // For the benchmark: steps sent, seconds rank 0 waited for their results,
  // and of those the other ranks' compute (the rest is communication).
  uint64_t steps() const { return steps_; }
  double wait_seconds() const { return wait_s_; }
  double remote_compute_seconds() const { return remote_compute_s_; }

 private:
  struct PendingSend;
  // Breaks the link for good (every later step fails at once) and throws.
  [[noreturn]] void fail(std::string why);

  StepLimits limits_;
  std::chrono::milliseconds timeout_;
  int32_t micro_batches_;
  std::deque<std::unique_ptr<PendingSend>> pending_;  // oldest first
  DecodedStep result_;
  std::string broken_;  // why (engine thread only)
  std::atomic<bool> broken_flag_{false};
  std::atomic<bool> interrupted_{false};
  std::atomic<int64_t> waiting_since_ns_{0};
  uint64_t steps_ = 0;
  double wait_s_ = 0, remote_compute_s_ = 0;
};

// Ranks 1..: serves steps until rank 0 shuts the pipeline down. Returns the
// exit status (0 after a shutdown).
int run_pipeline_worker(ModelRunner& model, KvCacheStorage& kv, ThreadPool& pool,
                        const StepLimits& limits);

}  // namespace pagellm
