#include "grammar/state_canon.h"

#include <algorithm>
#include <atomic>

namespace pagellm {

namespace {
uint64_t next_uid() {
  static std::atomic<uint64_t> n{1};
  return n.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

size_t GrammarStateCanon::VecHash::operator()(const std::vector<int32_t>& v) const {
  uint64_t h = 0xcbf29ce484222325ull ^ v.size();
  for (int32_t x : v) h = (h ^ static_cast<uint32_t>(x)) * 0x100000001b3ull;
  return static_cast<size_t>(h ^ (h >> 31));
}

GrammarStateCanon::GrammarStateCanon() : uid_(next_uid()) {}

uint64_t GrammarStateCanon::uid() const {
  std::lock_guard lock(mu_);
  return uid_;
}

size_t GrammarStateCanon::size() const {
  std::lock_guard lock(mu_);
  return nodes_.size() + set_entries_;
}

void GrammarStateCanon::restart() {
  nodes_.clear();
  sets_.clear();
  set_entries_ = 0;
  uid_ = next_uid();
}

int32_t GrammarStateCanon::canonical_node(const GrammarMatcher& m, Memo& memo, int32_t top) {
  // Post-order over the parent DAG (iterative: nestings may be deep). A
  // node's parents are older nodes, so this ends.
  todo_.assign(1, top);
  while (!todo_.empty()) {
    const int32_t id = todo_.back();
    if (memo.node[static_cast<size_t>(id)] >= 0) {
      todo_.pop_back();
      continue;
    }
    const GrammarMatcher::Node& n = m.node(id);
    int32_t& set = memo.set[static_cast<size_t>(n.parents)];
    if (set < 0) {
      const auto& parents = m.parent_set(n.parents);
      bool ready = true;
      for (int32_t p : parents)
        if (p >= 0 && memo.node[static_cast<size_t>(p)] < 0) {
          todo_.push_back(p);
          ready = false;
        }
      if (!ready) continue;
      members_.clear();
      for (int32_t p : parents) members_.push_back(p < 0 ? -1 : memo.node[static_cast<size_t>(p)]);
      std::sort(members_.begin(), members_.end());
      const auto [it, added] = sets_.try_emplace(members_, static_cast<int32_t>(sets_.size()));
      if (added) set_entries_ += members_.size();
      set = it->second;
    }
    const auto [it, added] =
        nodes_.try_emplace(NodeKey{n.rule, n.alt, n.pos, set}, static_cast<int32_t>(nodes_.size()));
    memo.node[static_cast<size_t>(id)] = it->second;
    todo_.pop_back();
  }
  return memo.node[static_cast<size_t>(top)];
}

void GrammarStateCanon::key(const GrammarMatcher& m, Memo& memo, std::vector<int32_t>& out,
                            uint64_t* uid) {
  std::lock_guard lock(mu_);
  // Restarted here, between keys: every id of a key belongs to one uid.
  if (nodes_.size() + set_entries_ > kMaxEntries) restart();
  if (memo.matcher_generation != m.generation() || memo.canon_uid != uid_) {
    memo.matcher_generation = m.generation();
    memo.canon_uid = uid_;
    memo.node.clear();
    memo.set.clear();
  }
  // Ids the matcher made since the memo last grew.
  memo.node.resize(m.n_nodes(), -1);
  memo.set.resize(m.n_sets(), -1);
  out.clear();
  for (int32_t id : m.stacks()) out.push_back(id < 0 ? -1 : canonical_node(m, memo, id));
  std::sort(out.begin(), out.end());
  *uid = uid_;
}

}  // namespace pagellm
