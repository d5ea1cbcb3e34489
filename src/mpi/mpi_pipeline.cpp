#include "mpi/mpi_pipeline.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

#include "util/error.h"

#if PAGELLM_MPI
#include <mpi.h>
#endif

namespace pagellm {

#if PAGELLM_MPI

namespace {

constexpr int kStepTag = 11;    // rank r -> r + 1: a step, or the shutdown
constexpr int kResultTag = 12;  // any rank -> 0: logits or an error

bool g_started = false;
bool g_failing_together = false;
int g_rank = 0, g_size = 1;

struct Finalizer {
  ~Finalizer() {
    int done = 0;
    if (g_started && MPI_Finalized(&done) == MPI_SUCCESS && !done) MPI_Finalize();
  }
} g_finalizer;

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"})
    if (std::getenv(v)) return true;
  return false;
}

using Clock = std::chrono::steady_clock;

// Polls (spinning briefly, then sleeping up to 1 ms) until `ready` or the
// deadline (or `stop`); false on timeout.
template <class Ready>
bool poll_until(Ready ready, Clock::time_point deadline, const std::atomic<bool>* stop = nullptr) {
  for (int i = 0;; ++i) {
    if (ready()) return true;
    if (Clock::now() >= deadline || (stop && stop->load())) return false;
    if (i > 200) std::this_thread::sleep_for(std::chrono::microseconds(i > 2000 ? 1000 : 50));
  }
}

bool send_bytes(int dest, int tag, const std::vector<uint8_t>& bytes, Clock::time_point deadline,
                const std::atomic<bool>* stop = nullptr) {
  MPI_Request req;
  MPI_Isend(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, dest, tag, MPI_COMM_WORLD, &req);
  const bool done = poll_until(
      [&] {
        int flag = 0;
        MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
        return flag != 0;
      },
      deadline, stop);
  if (!done) {
    MPI_Cancel(&req);
    MPI_Request_free(&req);
  }
  return done;
}

// A message from `src` (MPI_ANY_SOURCE: any) with `tag`; false on timeout.
bool recv_bytes(int src, int tag, std::vector<uint8_t>& out, Clock::time_point deadline,
                int* from = nullptr, const std::atomic<bool>* stop = nullptr) {
  MPI_Status st;
  const bool got = poll_until(
      [&] {
        int flag = 0;
        MPI_Iprobe(src, tag, MPI_COMM_WORLD, &flag, &st);
        return flag != 0;
      },
      deadline, stop);
  if (!got) return false;
  int n = 0;
  MPI_Get_count(&st, MPI_BYTE, &n);
  out.resize(static_cast<size_t>(n));
  MPI_Recv(out.data(), n, MPI_BYTE, st.MPI_SOURCE, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  if (from) *from = st.MPI_SOURCE;
  return true;
}

}  // namespace

void mpi_start(int* argc, char*** argv) {
  if (g_started || !launched_by_mpi()) return;
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
  g_started = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
}
bool mpi_built() { return true; }
int mpi_rank() { return g_rank; }
int mpi_size() { return g_size; }

void mpi_broadcast(std::vector<uint8_t>& bytes) {
  if (g_size == 1) return;
  uint64_t n = bytes.size();
  MPI_Bcast(&n, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  bytes.resize(n);
  MPI_Bcast(bytes.data(), static_cast<int>(n), MPI_BYTE, 0, MPI_COMM_WORLD);
}

std::vector<std::vector<uint8_t>> mpi_gather(const std::vector<uint8_t>& bytes) {
  if (g_size == 1) return {bytes};
  int n = static_cast<int>(bytes.size());
  std::vector<int> counts(static_cast<size_t>(g_size)), offsets(static_cast<size_t>(g_size));
  MPI_Gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::vector<uint8_t> all;
  if (g_rank == 0) {
    int total = 0;
    for (int r = 0; r < g_size; ++r) {
      offsets[static_cast<size_t>(r)] = total;
      total += counts[static_cast<size_t>(r)];
    }
    all.resize(static_cast<size_t>(total));
  }
  MPI_Gatherv(bytes.data(), n, MPI_BYTE, all.data(), counts.data(), offsets.data(), MPI_BYTE, 0,
              MPI_COMM_WORLD);
  std::vector<std::vector<uint8_t>> out;
  if (g_rank == 0)
    for (int r = 0; r < g_size; ++r)
      out.emplace_back(all.begin() + offsets[static_cast<size_t>(r)],
                       all.begin() + offsets[static_cast<size_t>(r)] + counts[static_cast<size_t>(r)]);
  return out;
}

void mpi_failing_together() { g_failing_together = true; }

void mpi_exit(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  if (g_started) {
    // Status 2 is a refusal every rank reached together (a plan that does not
    // fit): end together. Anything else may leave ranks waiting: abort them.
    if (code != 0 && code != 2 && !g_failing_together) MPI_Abort(MPI_COMM_WORLD, code);
    MPI_Finalize();
    g_started = false;
  }
  std::exit(code);
}

MpiPipelineLink::MpiPipelineLink(StepLimits limits, std::chrono::milliseconds timeout,
                                 int32_t micro_batches)
    : limits_(std::move(limits)), timeout_(timeout), micro_batches_(std::max(1, micro_batches)) {}

MpiPipelineLink::~MpiPipelineLink() {
  for (auto& p : pending_) (void)p.release();  // see fail()
  if (g_size > 1 && broken_.empty())
    send_bytes(1, kStepTag, encode_control(StepKind::kShutdown),
               Clock::now() + std::chrono::seconds(5));
}

int64_t MpiPipelineLink::waiting_ms() const {
  const int64_t since = waiting_since_ns_.load();
  if (since == 0) return 0;
  return (Clock::now().time_since_epoch().count() - since) / 1000000;
}

// A part sent to rank 1 and not yet answered: the bytes stay alive until the
// send completes.
struct MpiPipelineLink::PendingSend {
  std::vector<uint8_t> bytes;
  MPI_Request request = MPI_REQUEST_NULL;
};

void MpiPipelineLink::fail(std::string why) {
  broken_ = std::move(why);
  std::fprintf(stderr, "pagellm: pipeline: %s\n", broken_.c_str());
  broken_flag_ = true;
  // Sends still in flight may be read by MPI until the job ends: their bytes
  // are left allocated rather than freed under it.
  for (auto& p : pending_) (void)p.release();
  pending_.clear();
  throw Error(broken_);
}

void MpiPipelineLink::send(const Batch& batch, std::span<const float> hidden) {
  if (!broken_.empty()) throw Error(broken_);
  auto p = std::make_unique<PendingSend>();
  p->bytes = encode_step(batch, hidden);
  // Non-blocking: rank 1 takes the part (a shared-memory or RDMA get needs
  // nothing more from this rank) while this rank runs its layers on the next.
  MPI_Isend(p->bytes.data(), static_cast<int>(p->bytes.size()), MPI_BYTE, 1, kStepTag,
            MPI_COMM_WORLD, &p->request);
  pending_.push_back(std::move(p));
}

std::span<const float> MpiPipelineLink::receive(const Batch& batch) {
  if (!broken_.empty()) throw Error(broken_);
  if (pending_.empty()) throw Error("the pipeline link has no part in flight to receive");
  const auto t0 = Clock::now();
  const auto deadline = t0 + timeout_;
  waiting_since_ns_ = t0.time_since_epoch().count();
  struct Done {
    std::atomic<int64_t>& w;
    ~Done() { w = 0; }
  } done{waiting_since_ns_};
  const std::string lost =
      fmt::format("within {} s (a rank died or a link broke)", timeout_.count() / 1000.0);
  PendingSend& sent = *pending_.front();
  const bool taken = poll_until(
      [&] {
        int flag = 0;
        MPI_Test(&sent.request, &flag, MPI_STATUS_IGNORE);
        return flag != 0;
      },
      deadline, &interrupted_);
  if (!taken)
    fail(interrupted_ ? "the pipeline was stopped while rank 1 had not taken a step"
                      : "rank 1 did not take a step " + lost);
  pending_.pop_front();
  std::vector<uint8_t> buf;
  int from = -1;
  if (!recv_bytes(MPI_ANY_SOURCE, kResultTag, buf, deadline, &from, &interrupted_))
    fail(interrupted_ ? fmt::format("the pipeline was stopped while ranks 1-{} had not answered "
                                    "(a rank died or the job is ending)",
                                    g_size - 1)
                      : fmt::format("no result from ranks 1-{} {}", g_size - 1, lost));
  wait_s_ += std::chrono::duration<double>(Clock::now() - t0).count();
  ++steps_;
  const int64_t want = static_cast<int64_t>(batch.logit_tokens.size()) * limits_.n_vocab;
  try {
    decode_step(buf, limits_, result_, want);
  } catch (const FormatError& e) {
    throw Error(fmt::format("rank {} sent a bad result: {}", from, e.what()));
  }
  if (result_.kind == StepKind::kError) throw Error(result_.error);
  remote_compute_s_ += result_.compute_s;
  if (result_.kind != StepKind::kLogits)
    throw Error(fmt::format("rank {} sent a step where logits were expected", from));
  return result_.payload;
}

std::span<const float> MpiPipelineLink::forward_rest(const Batch& batch,
                                                     std::span<const float> hidden) {
  send(batch, hidden);
  return receive(batch);
}

int run_pipeline_worker(ModelRunner& model, KvCacheStorage& kv, ThreadPool& pool,
                        const StepLimits& limits) {
  const int rank = g_rank, size = g_size;
  std::vector<uint8_t> buf;
  DecodedStep step;
  // What this rank passes on goes out without waiting: rank 0 takes a
  // part's logits only after it has sent its next part, so a blocking send
  // would hold this rank idle while rank 0 works (no overlap between parts).
  // The bytes stay alive until their send completes; at most kMaxOutgoing
  // wait at once.
  constexpr size_t kMaxOutgoing = 8;
  struct Outgoing {
    std::vector<uint8_t> bytes;
    MPI_Request request = MPI_REQUEST_NULL;
  };
  std::deque<Outgoing> outgoing;
  const auto reap = [&](bool wait_oldest) {
    while (!outgoing.empty()) {
      int flag = 0;
      if (wait_oldest) {
        MPI_Wait(&outgoing.front().request, MPI_STATUS_IGNORE);
        flag = 1;
        wait_oldest = false;
      } else {
        MPI_Test(&outgoing.front().request, &flag, MPI_STATUS_IGNORE);
      }
      if (!flag) break;
      outgoing.pop_front();
    }
  };
  const auto post = [&](int dest, int tag, std::vector<uint8_t> bytes) {
    reap(outgoing.size() >= kMaxOutgoing);
    Outgoing& o = outgoing.emplace_back();
    o.bytes = std::move(bytes);
    MPI_Isend(o.bytes.data(), static_cast<int>(o.bytes.size()), MPI_BYTE, dest, tag,
              MPI_COMM_WORLD, &o.request);
  };
  // The next step from the rank before. While a send is in flight this rank
  // polls without sleeping: a large message moves in fragments that need
  // the sender's progress (a sleeping poll added ~5 ms to a step's logits).
  const auto next_step = [&] {
    MPI_Status st;
    for (int i = 0;; ++i) {
      reap(false);
      int flag = 0;
      MPI_Iprobe(rank - 1, kStepTag, MPI_COMM_WORLD, &flag, &st);
      if (flag) break;
      if (outgoing.empty() && i > 200)
        std::this_thread::sleep_for(std::chrono::microseconds(i > 2000 ? 1000 : 50));
      if (!outgoing.empty()) i = 0;
    }
    int n = 0;
    MPI_Get_count(&st, MPI_BYTE, &n);
    buf.resize(static_cast<size_t>(n));
    MPI_Recv(buf.data(), n, MPI_BYTE, st.MPI_SOURCE, kStepTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  };
  for (;;) {
    next_step();
    try {
      decode_step(buf, limits, step);
    } catch (const std::exception& e) {
      // Never trust a malformed message: report it, skip the step.
      std::fprintf(stderr, "pagellm: rank %d: %s\n", rank, e.what());
      post(0, kResultTag, encode_control(StepKind::kError, fmt::format("rank {}: {}", rank, e.what())));
      continue;
    }
    if (step.kind == StepKind::kShutdown) {
      if (rank + 1 < size)
        send_bytes(rank + 1, kStepTag, encode_control(StepKind::kShutdown),
                   Clock::now() + std::chrono::seconds(5));
      // Rank 0 is shutting down: what it did not take is not waited for.
      const auto deadline = Clock::now() + std::chrono::seconds(5);
      poll_until(
          [&] {
            reap(false);
            return outgoing.empty();
          },
          deadline);
      // Bytes MPI may still read are left allocated (moving the deque keeps them in place).
      if (!outgoing.empty()) (void)new std::deque<Outgoing>(std::move(outgoing));
      return 0;
    }
    try {
      if (step.kind != StepKind::kStep) throw Error("a message that is not a step");
      const auto t0 = Clock::now();
      for (const BlockCopy& c : step.batch.copies) kv.copy_block(c.src, c.dst, c.group);
      const auto out = model.forward_stage(step.batch, kv, pool, step.payload);
      const double compute =
          step.compute_s + std::chrono::duration<double>(Clock::now() - t0).count();
      if (rank == size - 1)
        post(0, kResultTag, encode_logits(out, compute));
      else
        post(rank + 1, kStepTag, encode_step(step.batch, out, compute));
    } catch (const std::exception& e) {
      post(0, kResultTag, encode_control(StepKind::kError, fmt::format("rank {}: {}", rank, e.what())));
    }
  }
}

#else  // no MPI in this build: one rank

void mpi_start(int*, char***) {}
bool mpi_built() { return false; }
int mpi_rank() { return 0; }
int mpi_size() { return 1; }
void mpi_broadcast(std::vector<uint8_t>&) {}
std::vector<std::vector<uint8_t>> mpi_gather(const std::vector<uint8_t>& bytes) { return {bytes}; }
void mpi_exit(int code) { std::exit(code); }
void mpi_failing_together() {}
struct MpiPipelineLink::PendingSend {};
MpiPipelineLink::MpiPipelineLink(StepLimits limits, std::chrono::milliseconds timeout,
                                 int32_t micro_batches)
    : limits_(std::move(limits)), timeout_(timeout), micro_batches_(std::max(1, micro_batches)) {}
MpiPipelineLink::~MpiPipelineLink() = default;
int64_t MpiPipelineLink::waiting_ms() const { return 0; }
std::span<const float> MpiPipelineLink::forward_rest(const Batch&, std::span<const float>) {
  throw Error("this build has no MPI");
}
void MpiPipelineLink::send(const Batch&, std::span<const float>) {
  throw Error("this build has no MPI");
}
std::span<const float> MpiPipelineLink::receive(const Batch&) {
  throw Error("this build has no MPI");
}
void MpiPipelineLink::fail(std::string why) { throw Error(why); }
int run_pipeline_worker(ModelRunner&, KvCacheStorage&, ThreadPool&, const StepLimits&) {
  throw Error("this build has no MPI");
}

#endif

}  // namespace pagellm
