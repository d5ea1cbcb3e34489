#include "kvcache/block_prefetch.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "util/fault_injector.h"

namespace pagellm {

std::optional<std::vector<uint8_t>> read_whole_file(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::vector<uint8_t> buf;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size > 0) buf.resize(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < buf.size()) {
    const ssize_t n = ::read(fd, buf.data() + got, buf.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  if (FaultInjector::hit("disk.read")) got /= 2;
  buf.resize(got);
  return buf;
}

BlockPrefetcher::BlockPrefetcher(size_t payload_bytes, uint64_t max_bytes, ReadHook hook)
    : payload_bytes_(std::max<size_t>(payload_bytes, 1)),
      max_entries_(max_bytes / std::max<size_t>(payload_bytes, 1)),
      hook_(std::move(hook)) {
  reader_ = std::thread([this] { reader_loop(); });
}

BlockPrefetcher::~BlockPrefetcher() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (reader_.joinable()) reader_.join();
}

bool BlockPrefetcher::request(uint64_t owner, const BlockFileHeader& want,
                              const std::filesystem::path& path) {
  try {
    std::lock_guard lk(mu_);
    if (auto it = entries_.find(want.key); it != entries_.end()) {
      auto& owners = it->second.owners;
      if (std::find(owners.begin(), owners.end(), owner) == owners.end()) owners.push_back(owner);
      return true;
    }
    if (entries_.size() >= max_entries_) {
      ++stats_.dropped;
      return false;
    }
    Entry e;
    e.want = want;
    e.path = path;
    e.owners.push_back(owner);
    queue_.push_back(want.key);
    entries_.emplace(want.key, std::move(e));
  } catch (const std::exception&) {
    return false;  // out of memory: the block is read when needed, or computed
  }
  cv_.notify_one();
  return true;
}

void BlockPrefetcher::forget(uint64_t owner) {
  std::lock_guard lk(mu_);
  for (auto it = entries_.begin(); it != entries_.end();) {
    auto& owners = it->second.owners;
    std::erase(owners, owner);
    it = owners.empty() ? entries_.erase(it) : std::next(it);
  }
  if (entries_.empty()) queue_.clear();
}

uint64_t BlockPrefetcher::bytes_ahead_locked(const Hash128& key) const {
  uint64_t ahead = 0;
  for (const auto& [k, e] : entries_)  // the read under way
    if (e.state == State::kReading && !(k == key)) ahead += payload_bytes_;
  for (const Hash128& k : queue_) {
    auto it = entries_.find(k);
    if (it == entries_.end() || it->second.state != State::kQueued) continue;
    ahead += payload_bytes_;
    if (k == key) return ahead;
  }
  return ahead + payload_bytes_;  // being read now
}

BlockPrefetcher::Taken BlockPrefetcher::take(
    const Hash128& key, std::optional<std::chrono::steady_clock::time_point> until) {
  Taken t;
  std::unique_lock lk(mu_);
  auto pending = [&] {
    auto it = entries_.find(key);
    return it != entries_.end() && it->second.state != State::kDone;
  };
  if (until) done_cv_.wait_until(lk, *until, [&] { return !pending(); });
  auto it = entries_.find(key);
  if (it == entries_.end()) return t;
  Entry& e = it->second;
  if (e.state != State::kDone) {
    t.result = Result::kPending;
    t.bytes_ahead = bytes_ahead_locked(key);
    return t;
  }
  t.result = e.result;
  t.payload = std::move(e.payload);
  t.status = e.status;
  t.file_bytes = e.file_bytes;
  entries_.erase(it);
  return t;
}

double BlockPrefetcher::read_rate() const {
  std::lock_guard lk(mu_);
  return rate_;
}

BlockPrefetchStats BlockPrefetcher::stats() const {
  std::lock_guard lk(mu_);
  return stats_;
}

void BlockPrefetcher::reader_loop() {
  std::unique_lock lk(mu_);
  for (;;) {
    cv_.wait(lk, [this] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    const Hash128 key = queue_.front();
    queue_.pop_front();
    auto it = entries_.find(key);
    if (it == entries_.end() || it->second.state != State::kQueued) continue;
    it->second.state = State::kReading;
    const std::filesystem::path path = it->second.path;
    const BlockFileHeader want = it->second.want;
    lk.unlock();
    // Off the engine thread: open, read and check; only the result is shared.
    Result result = Result::kMissing;
    BlockFileStatus status = BlockFileStatus::kOk;
    std::vector<uint8_t> payload;
    uint64_t file_bytes = 0;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      if (hook_) hook_(path);
      if (auto file = read_whole_file(path)) {
        file_bytes = file->size();
        std::span<const uint8_t> body;
        status = check_block_file(*file, want, payload_bytes_, body);
        if (status == BlockFileStatus::kOk) {
          payload.assign(body.begin(), body.end());
          result = Result::kReady;
        } else {
          result = Result::kRefused;
        }
      }
    } catch (const std::exception&) {
      result = Result::kMissing;  // out of memory: as if not there
    }
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    lk.lock();
    if (file_bytes > 0 && s > 0) {
      const double r = static_cast<double>(file_bytes) / s;
      rate_ = rate_ <= 0 ? r : 0.8 * rate_ + 0.2 * r;
    }
    ++stats_.reads;
    stats_.read_bytes += file_bytes;
    // Forgotten meanwhile: discarded. Asked for again meanwhile: the same key
    // names the same check, so the result serves the new entry.
    it = entries_.find(key);
    if (it == entries_.end() || it->second.state == State::kDone) continue;
    Entry& e = it->second;
    e.state = State::kDone;
    e.result = result;
    e.status = status;
    e.payload = std::move(payload);
    e.file_bytes = file_bytes;
    done_cv_.notify_all();
  }
}

}  // namespace pagellm
