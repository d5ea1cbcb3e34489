#include "engine/async_engine.h"

#include <map>

namespace pagellm {

std::optional<SeqEvent> RequestStream::next(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return std::nullopt;
  SeqEvent ev = std::move(events_.front());
  events_.pop_front();
  if (ev.request_finished) request_read_ = true;
  return ev;
}

void RequestStream::push(const SeqEvent& ev) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (ended_) return;
    if (ev.finished && ev.index >= 0 && ev.index < static_cast<int32_t>(finished_pushed_.size()))
      finished_pushed_[static_cast<size_t>(ev.index)] = true;
    events_.push_back(ev);
  }
  cv_.notify_all();
}

bool RequestStream::end_with_error(const std::string& why) {
  bool any = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (ended_) return false;
    ended_ = true;
    for (size_t i = 0; i < finished_pushed_.size(); ++i) {
      if (finished_pushed_[i]) continue;
      finished_pushed_[i] = true;
      SeqEvent ev;
      ev.index = static_cast<int32_t>(i);
      ev.finished = true;
      ev.finish_reason = FinishReason::kError;
      ev.error = why;
      events_.push_back(std::move(ev));
      any = true;
    }
    if (any) events_.back().request_finished = true;
  }
  cv_.notify_all();
  return any;
}

bool RequestStream::finished() const {
  std::lock_guard<std::mutex> lock(mu_);
  return request_read_;
}

void RequestStream::cancel() {
  if (owner_) owner_->enqueue({AsyncEngine::Command::kAbort, ticket_, {}, nullptr});
}

AsyncEngine::AsyncEngine(Engine& engine, int32_t max_pending)
    : engine_(engine), max_pending_(max_pending) {
  stats_ = engine_.stats();
  // A long prefill is one step: publish the stats as it starts, not only
  // after it, else /metrics shows nothing running for its whole length.
  engine_.set_step_observer([this] {
    EngineStats s = engine_.stats();
    std::lock_guard<std::mutex> lock(mu_);
    stats_ = std::move(s);
  });
  thread_ = std::thread([this] { loop(); });
}

AsyncEngine::~AsyncEngine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  engine_.set_step_observer(nullptr);  // the engine may outlive this front
}

std::shared_ptr<RequestStream> AsyncEngine::submit(Request req) {
  std::vector<Request> one;
  one.push_back(std::move(req));
  return submit_all(std::move(one)).front();
}

std::vector<std::shared_ptr<RequestStream>> AsyncEngine::submit_all(std::vector<Request> reqs) {
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const Request& req : reqs) {
    auto stream = std::make_shared<RequestStream>();
    stream->owner_ = this;
    stream->n_samples_ = std::max(1, req.n);
    stream->finished_pushed_.assign(static_cast<size_t>(stream->n_samples_), false);
    streams.push_back(std::move(stream));
  }
  {
    // One lock: the engine thread takes them all before its next step.
    std::lock_guard<std::mutex> lock(mu_);
    if (!accepting_) throw QueueFullError("the server is shutting down");
    if (in_flight_ + static_cast<int64_t>(reqs.size()) > max_pending_)
      throw QueueFullError("too many requests in flight (" + std::to_string(in_flight_) + ")");
    std::erase_if(open_streams_, [](const auto& w) {
      auto sp = w.lock();
      return !sp || sp->finished();
    });
    for (size_t i = 0; i < reqs.size(); ++i) {
      auto& stream = streams[i];
      ++in_flight_;
      stream->ticket_ = next_ticket_++;
      commands_.push_back({Command::kSubmit, stream->ticket_, std::move(reqs[i]), stream});
      open_streams_.push_back(stream);
    }
  }
  cv_.notify_all();
  return streams;
}

int32_t AsyncEngine::end_in_flight_now(const std::string& why) {
  std::vector<std::shared_ptr<RequestStream>> open;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& w : open_streams_)
      if (auto sp = w.lock()) open.push_back(std::move(sp));
  }
  int32_t ended = 0;
  for (auto& stream : open) ended += stream->end_with_error(why) ? 1 : 0;
  return ended;
}

void AsyncEngine::enqueue(Command cmd) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    commands_.push_back(std::move(cmd));
  }
  cv_.notify_all();
}

EngineStats AsyncEngine::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

int32_t AsyncEngine::in_flight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_flight_;
}

void AsyncEngine::shutdown(std::chrono::milliseconds timeout) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    accepting_ = false;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline && in_flight() > 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::lock_guard<std::mutex> lock(mu_);
  stop_ = true;
  cv_.notify_all();
}

void AsyncEngine::loop() {
  // Engine-thread state: which engine request each ticket became.
  std::map<uint64_t, uint64_t> ticket_to_request;
  std::map<uint64_t, std::shared_ptr<RequestStream>> streams;  // by ticket
  std::string failure;  // set while aborting everything after a failed step
  auto finish_ticket = [&](uint64_t ticket) {
    ticket_to_request.erase(ticket);
    streams.erase(ticket);
    std::lock_guard<std::mutex> lock(mu_);
    --in_flight_;
  };
  for (;;) {
    std::deque<Command> cmds;
    bool stop;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (!stop_ && commands_.empty() && !engine_.has_work()) {
        // Idle with an elastic pool to give back: wake for the memory checks.
        if (engine_.watches_memory())
          cv_.wait_for(lock, std::chrono::milliseconds(engine_.config().memory_check_ms),
                       [&] { return stop_ || !commands_.empty(); });
        else
          cv_.wait(lock, [&] { return stop_ || !commands_.empty(); });
      }
      cmds.swap(commands_);
      stop = stop_;
    }
    for (auto& c : cmds) {
      if (c.kind == Command::kSubmit) {
        auto stream = c.stream;
        const uint64_t ticket = c.ticket;
        try {
          streams[ticket] = stream;
          const uint64_t id = engine_.submit(std::move(c.req), [&, ticket](const SeqEvent& ev) {
            auto it = streams.find(ticket);
            if (it == streams.end()) return;
            auto target = it->second;
            SeqEvent out = ev;
            if (!failure.empty() && ev.finished && ev.finish_reason == FinishReason::kAbort) {
              out.finish_reason = FinishReason::kError;
              out.error = failure;
            }
            // Count the request out before its last event is visible to the client.
            if (ev.request_finished) finish_ticket(ticket);
            target->push(out);
          });
          if (streams.count(ticket)) ticket_to_request[ticket] = id;
        } catch (const std::exception& e) {  // refused (Error), or out of memory
          SeqEvent ev;
          ev.finished = true;
          ev.finish_reason = FinishReason::kError;
          ev.error = e.what();
          if (streams.count(ticket)) finish_ticket(ticket);
          for (int32_t i = 0; i < stream->n_samples_; ++i) {
            ev.index = i;
            ev.request_finished = i + 1 == stream->n_samples_;
            stream->push(ev);
          }
        }
      } else {
        auto it = ticket_to_request.find(c.ticket);
        if (it != ticket_to_request.end()) engine_.abort(it->second);
      }
    }
    if (stop) {
      for (auto& [ticket, id] : std::map<uint64_t, uint64_t>(ticket_to_request)) engine_.abort(id);
      std::lock_guard<std::mutex> lock(mu_);
      stats_ = engine_.stats();
      return;
    }
    if (!engine_.has_work()) engine_.check_memory();
    if (engine_.has_work()) {
      try {
        if (!engine_.step()) {
          // Work is waiting but none can run (admission paused by the swap
          // guard): wait for a command or the next memory check.
          std::unique_lock<std::mutex> lock(mu_);
          cv_.wait_for(lock, std::chrono::milliseconds(20),
                       [&] { return stop_ || !commands_.empty(); });
        }
      } catch (const std::exception& e) {
        // Not expected (the engine turns failures of a request into that
        // request's error); fail what is in flight rather than take the
        // process down.
        const std::string error = std::string("internal error: ") + e.what();
        for (auto& [ticket, id] : std::map<uint64_t, uint64_t>(ticket_to_request)) {
          try {
            engine_.fail(id, error);
          } catch (const std::exception&) {
            if (auto it = streams.find(ticket); it != streams.end()) {
              auto stream = it->second;
              finish_ticket(ticket);
              SeqEvent ev;
              ev.finished = true;
              ev.finish_reason = FinishReason::kError;
              ev.error = error;
              for (int32_t i = 0; i < stream->n_samples_; ++i) {
                ev.index = i;
                ev.request_finished = i + 1 == stream->n_samples_;
                stream->push(ev);
              }
            }
          }
        }
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    stats_ = engine_.stats();
  }
}

}  // namespace pagellm
