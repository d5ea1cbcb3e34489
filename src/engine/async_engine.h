// The threaded front of the engine: one engine thread owns the Engine (model,
// KV cache, scheduler) and runs steps; any other thread submits requests and
// reads their events through a RequestStream. Commands travel through a
// bounded queue; nothing but events crosses back, so no exception ever
// crosses threads (a refused request ends with finish_reason "error").
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "util/error.h"

namespace pagellm {

class AsyncEngine;

class RequestStream {
 public:
  // Next event, waiting up to `timeout`; nullopt on timeout.
  std::optional<SeqEvent> next(std::chrono::milliseconds timeout);
  // Asks the engine to abort the request (e.g. the client went away).
  void cancel();
  bool finished() const;  // the request's last event (SeqEvent::request_finished) was read
  // Ends every sample that has not finished with an error event, from any
  // thread; whatever the engine sends for this request afterwards is dropped.
  // False if every sample had already finished.
  bool end_with_error(const std::string& why);

 private:
  friend class AsyncEngine;
  void push(const SeqEvent& ev);

  AsyncEngine* owner_ = nullptr;
  uint64_t ticket_ = 0;
  int32_t n_samples_ = 1;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<SeqEvent> events_;
  bool request_read_ = false;
  std::vector<bool> finished_pushed_;  // by sample index
  bool ended_ = false;                 // by end_with_error
};

class QueueFullError : public Error {
 public:
  using Error::Error;
};

class AsyncEngine {
 public:
  // Starts the engine thread. `max_pending` bounds requests that are
  // submitted but not yet finished.
  AsyncEngine(Engine& engine, int32_t max_pending);
  ~AsyncEngine();  // aborts what is in flight and joins the thread
  AsyncEngine(const AsyncEngine&) = delete;
  AsyncEngine& operator=(const AsyncEngine&) = delete;

  // Thread-safe. Throws QueueFullError when max_pending requests are in flight.
  std::shared_ptr<RequestStream> submit(Request req);
  // All or none (QueueFullError when they do not all fit in max_pending),
  // queued together: the engine admits them in the same step as far as its
  // limits allow.
  std::vector<std::shared_ptr<RequestStream>> submit_all(std::vector<Request> reqs);
  // A copy of the engine's counters as of its last step (thread-safe).
  EngineStats stats() const;
  int32_t in_flight() const;
  // Stops taking requests; waits up to `timeout` for in-flight ones, then aborts the rest.
  void shutdown(std::chrono::milliseconds timeout);
  // Ends every request in flight with `why` at once, without waiting for the
  // engine thread (which may be inside a long step): for a process that is
  // about to be killed, so that clients still get their error events.
  // Returns how many requests it ended.
  int32_t end_in_flight_now(const std::string& why);

 private:
  friend class RequestStream;
  struct Command {
    enum Kind { kSubmit, kAbort } kind;
    uint64_t ticket;
    Request req;
    std::shared_ptr<RequestStream> stream;
  };
  void enqueue(Command cmd);
  void loop();

  // Streams submitted and not known to be finished (for end_in_flight_now).
  std::vector<std::weak_ptr<RequestStream>> open_streams_;

  Engine& engine_;
  int32_t max_pending_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Command> commands_;
  bool stop_ = false;
  bool accepting_ = true;
  int32_t in_flight_ = 0;
  uint64_t next_ticket_ = 1;
  EngineStats stats_;
  std::thread thread_;
};

}  // namespace pagellm
