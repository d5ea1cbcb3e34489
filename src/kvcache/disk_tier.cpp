#include "kvcache/disk_tier.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <chrono>
#include <functional>

#include "util/error.h"
#include "util/fault_injector.h"

namespace pagellm {

namespace fs = std::filesystem;

namespace {

constexpr const char* kSuffix = ".kvb";

// Writes `bytes` to a new file `path`; false (errno set) on failure, which
// leaves no file behind. "disk.write" injects a full disk.
bool write_new(const fs::path& path, std::span<const uint8_t> bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  size_t done = 0;
  bool ok = true;
  while (done < bytes.size()) {
    if (FaultInjector::hit("disk.write")) {
      errno = ENOSPC;
      ok = false;
      break;
    }
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ok = false;
      break;
    }
    done += static_cast<size_t>(n);
  }
  const int err = errno;
  if (::close(fd) != 0) ok = false;
  if (!ok) {
    ::unlink(path.c_str());
    errno = err;
  }
  return ok;
}

// A name no other writer (process or thread) uses at the same time.
fs::path temp_name(const fs::path& dir, uint64_t counter) {
  const auto tid = std::hash<std::thread::id>{}(std::this_thread::get_id());
  return dir / fmt::format(".tmp-{}-{:x}-{}", ::getpid(), tid, counter);
}

}  // namespace

Hash128 model_file_digest(const std::string& model_path, const std::string& dir) {
  struct stat st {};
  if (::stat(model_path.c_str(), &st) != 0)
    throw SystemError(errno_message("cannot read " + model_path, errno));
  std::error_code ec;
  fs::create_directories(dir, ec);  // a failure shows when the digest cannot be cached
  const fs::path abs = fs::absolute(model_path, ec);
  ContentHasher name(0x6d6f64656cull);
  name.add(std::string_view(ec ? model_path : abs.string()));
  name.add(static_cast<int64_t>(st.st_size));
  name.add(static_cast<int64_t>(st.st_mtim.tv_sec));
  name.add(static_cast<int64_t>(st.st_mtim.tv_nsec));
  const fs::path cached = fs::path(dir) / ("model-" + name.digest().hex() + ".digest");
  if (auto text = read_whole_file(cached)) {
    const std::string s(text->begin(), text->end());
    if (auto h = Hash128::from_hex(s.substr(0, std::min<size_t>(32, s.size())))) return *h;
  }
  const int fd = ::open(model_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw SystemError(errno_message("cannot read " + model_path, errno));
  ContentHasher h(0x77656967687473ull);
  std::vector<uint8_t> buf(size_t{4} << 20);
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      throw SystemError(errno_message("cannot read " + model_path, err));
    }
    if (n == 0) break;
    h.update(buf.data(), static_cast<size_t>(n));
  }
  ::close(fd);
  const Hash128 digest = h.digest();
  const std::string text = digest.hex() + "\n";
  const fs::path tmp = temp_name(dir, 0);
  if (write_new(tmp, {reinterpret_cast<const uint8_t*>(text.data()), text.size()}) &&
      std::rename(tmp.c_str(), cached.c_str()) != 0)
    ::unlink(tmp.c_str());
  return digest;
}


Hash128 storage_layout_digest(const KvCacheStorage& storage) {
  ContentHasher h(0x6c61796f7574ull);
  for (const auto& pl : storage.placements()) {
    h.add(std::string_view(pl.device));
    h.add(pl.layer_begin);
    h.add(pl.layer_end);
  }
  for_each_block_part(storage, [&h](KvPool& p, int32_t layer, uint8_t* base, size_t bytes) {
    const KvPoolShape& s = p.shape();
    h.add(layer);
    h.add(s.n_kv_heads);
    h.add(s.head_dim);
    h.add(static_cast<uint32_t>(s.dtype));
    h.add(static_cast<uint64_t>(bytes));
    h.add(static_cast<int32_t>(base == p.k(layer)));
  });
  return h.digest();
}

DiskTier::DiskTier(DiskTierOptions options, BlockFileIdentity identity, KvCacheStorage& storage,
                   int32_t num_blocks)
    : options_(std::move(options)),
      identity_(identity),
      root_key_(identity_key(identity)),
      storage_(storage),
      block_bytes_(storage_block_bytes(storage)),
      device_pool_(device_pool_backend(storage) != nullptr),
      key_of_block_(static_cast<size_t>(std::max(num_blocks, 0))),
      parent_of_block_(static_cast<size_t>(std::max(num_blocks, 0))),
      key_valid_(static_cast<size_t>(std::max(num_blocks, 0)), false) {
  std::error_code ec;
  fs::create_directories(options_.dir, ec);
  if (ec || !fs::is_directory(options_.dir))
    throw ConfigError(fmt::format("--cache-dir {}: cannot create the directory{}", options_.dir,
                                  ec ? ": " + ec.message() : ""));
  options_.queue_bytes = std::max<uint64_t>(options_.queue_bytes, block_bytes_);
  evict();  // learns what is there (and trims it to the size asked for)
  if (options_.prefetch_bytes >= block_bytes_ && block_bytes_ > 0)
    prefetch_ = std::make_unique<BlockPrefetcher>(block_bytes_, options_.prefetch_bytes,
                                                  options_.read_hook);
  writer_ = std::thread([this] { writer_loop(); });
}

DiskTier::~DiskTier() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (writer_.joinable()) writer_.join();
}

fs::path DiskTier::file_for(const Hash128& key) const {
  return fs::path(options_.dir) / (key.hex() + kSuffix);
}

Hash128 DiskTier::parent_key(int32_t parent) const {
  return parent < 0 ? root_key_ : key_of_block_[static_cast<size_t>(parent)];
}

static bool valid_block(const std::vector<bool>& valid, int32_t b) {
  return b >= 0 && static_cast<size_t>(b) < valid.size() && valid[static_cast<size_t>(b)];
}

bool DiskTier::learn_key(int32_t block, int32_t parent, std::span<const int32_t> tokens) {
  if (block < 0 || static_cast<size_t>(block) >= key_valid_.size()) return false;
  const auto b = static_cast<size_t>(block);
  key_valid_[b] = false;
  if (parent >= 0 && !valid_block(key_valid_, parent)) return false;
  parent_of_block_[b] = parent_key(parent);
  key_of_block_[b] = block_key(parent_of_block_[b], tokens);
  key_valid_[b] = true;
  return true;
}

void DiskTier::committed(int32_t block, int32_t parent, std::span<const int32_t> tokens) {
  if (!learn_key(block, parent, tokens)) return;
  const auto b = static_cast<size_t>(block);
  queue_block(block, {identity_, key_of_block_[b], parent_of_block_[b], {tokens.begin(), tokens.end()}});
}

void DiskTier::restored(int32_t block, int32_t parent, std::span<const int32_t> tokens,
                        std::span<const uint8_t> payload) {
  if (!learn_key(block, parent, tokens)) return;
  const auto b = static_cast<size_t>(block);
  demoted({identity_, key_of_block_[b], parent_of_block_[b], {tokens.begin(), tokens.end()}},
          payload);
}

void DiskTier::evicted(int32_t block, std::span<const int32_t> tokens) {
  if (!valid_block(key_valid_, block)) return;
  const auto b = static_cast<size_t>(block);
  queue_block(block, {identity_, key_of_block_[b], parent_of_block_[b], {tokens.begin(), tokens.end()}});
}

void DiskTier::queue_block(int32_t block, BlockFileHeader header) {
  {
    std::lock_guard lk(mu_);
    if (on_disk_.count(header.key)) return;
    if (queued_bytes_ + block_bytes_ > options_.queue_bytes) {
      ++stats_.writes_dropped;
      return;
    }
  }
  try {
    Job job;
    job.header = std::move(header);
    job.payload.resize(block_bytes_);
    copy_block_out(storage_, block, job.payload.data());
    std::lock_guard lk(mu_);
    on_disk_.insert(job.header.key);  // pending: not queued twice
    queued_bytes_ += block_bytes_;
    queue_.push_back(std::move(job));
  } catch (const std::exception&) {
    std::lock_guard lk(mu_);
    ++stats_.writes_dropped;  // out of memory, or a device copy failed: not cached
    return;
  }
  cv_.notify_one();
}

void DiskTier::demoted(const BlockFileHeader& header, std::span<const uint8_t> payload) {
  if (payload.size() != block_bytes_ || !(header.identity == identity_)) return;
  try {
    Job job{header, {payload.begin(), payload.end()}};
    {
      std::lock_guard lk(mu_);
      if (on_disk_.count(header.key)) return;
      if (queued_bytes_ + block_bytes_ > options_.queue_bytes) {
        ++stats_.writes_dropped;
        return;
      }
      on_disk_.insert(header.key);
      queued_bytes_ += block_bytes_;
      queue_.push_back(std::move(job));
    }
    cv_.notify_one();
  } catch (const std::exception&) {
    std::lock_guard lk(mu_);
    ++stats_.writes_dropped;
  }
}

void DiskTier::prefetch(uint64_t owner, int32_t parent, std::span<const int32_t> tokens,
                        size_t held) {
  if (!prefetch_ || (parent >= 0 && !valid_block(key_valid_, parent))) return;
  const size_t bs = static_cast<size_t>(identity_.block_size);
  Hash128 pk = parent_key(parent);
  try {
    for (size_t i = 0; (i + 1) * bs <= tokens.size(); ++i) {
      const auto blk = tokens.subspan(i * bs, bs);
      const Hash128 key = block_key(pk, blk);
      if (i >= held) {
        {
          std::lock_guard lk(mu_);
          if (!on_disk_.count(key)) return;  // the chain ends here
        }
        if (!prefetch_->request(owner, {identity_, key, pk, {blk.begin(), blk.end()}},
                                file_for(key)))
          return;
      }
      pk = key;
    }
  } catch (const std::exception&) {
    // Out of memory: what is not read ahead is read when needed, or computed.
  }
}

void DiskTier::forget_prefetch(uint64_t owner) {
  if (prefetch_) prefetch_->forget(owner);
}

bool DiskTier::fetch(int32_t parent, std::span<const int32_t> tokens) {
  if (parent >= 0 && !valid_block(key_valid_, parent)) return false;
  try {
    BlockFileHeader want{identity_, {}, parent_key(parent), {tokens.begin(), tokens.end()}};
    want.key = block_key(want.parent, tokens);
    return fetch_read(want);
  } catch (const std::exception&) {
    std::lock_guard lk(mu_);
    ++stats_.misses;
    return false;
  }
}

bool DiskTier::fetch_read(const BlockFileHeader& want) {
  const fs::path path = file_for(want.key);
  const double block_tokens = identity_.block_size;
  BlockFileStatus status = BlockFileStatus::kOk;
  uint64_t file_bytes = 0;
  bool found = false, ahead = false, waited = false;
  auto recompute = [this] {
    std::lock_guard lk(mu_);
    ++stats_.recomputed;
    return false;
  };
  BlockPrefetcher::Taken t;
  if (prefetch_) t = prefetch_->take(want.key);
  if (t.result == BlockPrefetcher::Result::kPending) {
    // Wait only for a read cheaper than computing, and never longer than
    // computing would take (rates unmeasured: up to a second).
    if (!cost_.restore_pays(static_cast<double>(t.bytes_ahead), block_tokens, prefetch_->read_rate()))
      return recompute();
    const double limit = cost_.prefill_rate() > 0 ? block_tokens / cost_.prefill_rate() : 1.0;
    t = prefetch_->take(want.key, std::chrono::steady_clock::now() +
                                      std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                          std::chrono::duration<double>(limit)));
    if (t.result == BlockPrefetcher::Result::kPending) return recompute();
    waited = true;
  }
  switch (t.result) {
    case BlockPrefetcher::Result::kReady:
      staged_payload_ = std::move(t.payload);
      file_bytes = t.file_bytes;
      found = ahead = true;
      break;
    case BlockPrefetcher::Result::kRefused:
      status = t.status;
      break;
    case BlockPrefetcher::Result::kMissing:
      break;
    default: {  // not read ahead: read here, if that beats computing it
      const double rate = cost_.copy_rate() > 0 ? cost_.copy_rate()
                                                : (prefetch_ ? prefetch_->read_rate() : 0.0);
      if (!cost_.restore_pays(static_cast<double>(block_bytes_), block_tokens, rate))
        return recompute();
      const auto t0 = std::chrono::steady_clock::now();
      auto file = read_whole_file(path);
      if (!file) break;
      std::span<const uint8_t> payload;
      status = check_block_file(*file, want, block_bytes_, payload);
      if (status != BlockFileStatus::kOk) break;
      staged_payload_.assign(payload.begin(), payload.end());
      file_bytes = file->size();
      cost_.copied(static_cast<double>(file_bytes),
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      found = true;
    }
  }
  if (!found) {
    if (status != BlockFileStatus::kOk) {
      warn_once(status, path);
      ::unlink(path.c_str());
    }
    std::lock_guard lk(mu_);
    if (status != BlockFileStatus::kOk) {
      on_disk_.erase(want.key);
      ++stats_.skipped;
    }
    ++stats_.misses;
    return false;
  }
  staged_ = want;
  ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // recently used: evicted last
  std::lock_guard lk(mu_);
  on_disk_.insert(staged_.key);
  stats_.bytes_read += file_bytes;
  // Counted as hits in place(); `ahead` marks the block for it.
  staged_ahead_ = ahead;
  staged_waited_ = waited;
  return true;
}

PrefixTier::RestoreCopy DiskTier::place(int32_t block) {
  key_of_block_[static_cast<size_t>(block)] = staged_.key;
  parent_of_block_[static_cast<size_t>(block)] = staged_.parent;
  key_valid_[static_cast<size_t>(block)] = true;
  {
    std::lock_guard lk(mu_);
    ++stats_.hits;
    if (staged_ahead_) ++stats_.prefetched;
    if (staged_ahead_ && staged_waited_) ++stats_.prefetch_waited;
  }
  if (device_pool_) {
    copy_block_in(storage_, block, staged_payload_.data());
    return {};
  }
  return [this, block, payload = std::move(staged_payload_)] {
    copy_block_in(storage_, block, payload.data());
  };
}

void DiskTier::warn_once(BlockFileStatus cause, const fs::path& file) {
  if (!warned_.insert(cause).second) return;
  std::fprintf(stderr,
               "pagellm: warning: KV disk tier: skipped %s: %s; the block is computed instead "
               "(further files skipped for this reason are not reported)\n",
               file.c_str(), block_file_status_text(cause));
}

void DiskTier::writer_loop() {
  std::unique_lock lk(mu_);
  for (;;) {
    cv_.wait(lk, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, every write done
    Job job = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lk.unlock();
    write_file(job);
    lk.lock();
    busy_ = false;
    queued_bytes_ -= block_bytes_;
    cv_.notify_all();
  }
}

void DiskTier::write_file(const Job& job) {
  bool over = false;
  try {
    const std::vector<uint8_t> bytes = encode_block_file(job.header, job.payload);
    const fs::path tmp = temp_name(options_.dir, ++temp_counter_);
    const fs::path dst = file_for(job.header.key);
    if (!write_new(tmp, bytes) || std::rename(tmp.c_str(), dst.c_str()) != 0) {
      const int err = errno;
      ::unlink(tmp.c_str());
      std::lock_guard lk(mu_);
      on_disk_.erase(job.header.key);
      ++stats_.writes_dropped;
      if (!write_warned_) {
        write_warned_ = true;
        std::fprintf(stderr, "pagellm: warning: KV disk tier: cannot write %s: %s (blocks that "
                     "cannot be written are not cached on disk)\n",
                     dst.c_str(), std::strerror(err));
      }
      return;
    }
    std::lock_guard lk(mu_);
    ++stats_.files_written;
    stats_.bytes_written += bytes.size();
    dir_bytes_ += bytes.size();
    over = dir_bytes_ > options_.max_bytes;
  } catch (const std::exception&) {
    std::lock_guard lk(mu_);
    on_disk_.erase(job.header.key);
    ++stats_.writes_dropped;
    return;
  }
  if (over) evict();
}

void DiskTier::evict() {
  struct Entry {
    fs::file_time_type when;
    uint64_t bytes;
    fs::path path;
  };
  std::vector<Entry> files;
  uint64_t total = 0;
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  for (fs::directory_iterator it(options_.dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code e2;
    const fs::path& p = it->path();
    const std::string name = p.filename().string();
    const auto when = it->last_write_time(e2);
    if (e2) continue;
    if (name.starts_with(".tmp-")) {
      // Another writer's file that never got renamed (it died): gone after an hour.
      if (now - when > std::chrono::hours(1)) fs::remove(p, e2);
      continue;
    }
    if (!name.ends_with(kSuffix)) continue;
    const uint64_t size = it->file_size(e2);
    if (e2) continue;
    files.push_back({when, size, p});
    total += size;
  }
  std::sort(files.begin(), files.end(),
            [](const Entry& a, const Entry& b) { return a.when < b.when; });
  size_t drop = 0;
  uint64_t left = total;
  if (total > options_.max_bytes) {
    const uint64_t target = options_.max_bytes / 10 * 9;
    while (drop < files.size() && left > target) left -= files[drop++].bytes;
  }
  uint64_t evicted = 0;
  std::vector<Hash128> gone, kept;
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string stem = files[i].path.stem().string();
    auto key = Hash128::from_hex(stem);
    if (i < drop) {
      std::error_code e2;
      if (fs::remove(files[i].path, e2)) ++evicted;
      if (key) gone.push_back(*key);
    } else if (key) {
      kept.push_back(*key);
    }
  }
  std::lock_guard lk(mu_);
  for (const Hash128& k : gone) on_disk_.erase(k);
  for (const Hash128& k : kept) on_disk_.insert(k);
  stats_.files_evicted += evicted;
  dir_bytes_ = left;
}

void DiskTier::flush() {
  std::unique_lock lk(mu_);
  cv_.wait(lk, [this] { return queue_.empty() && !busy_; });
}

DiskTierStats DiskTier::stats() const {
  DiskTierStats s;
  {
    std::lock_guard lk(mu_);
    s = stats_;
  }
  if (prefetch_) s.prefetch_reads = prefetch_->stats().reads;
  return s;
}

}  // namespace pagellm
