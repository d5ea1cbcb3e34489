#include "grammar/grammar_matcher.h"

#include <fmt/format.h>

#include <algorithm>

#include "util/error.h"

namespace pagellm {

namespace {
// What one sequence's parse state may hold (~100 MiB): JSON and schema
// grammars stay in the thousands; a grammar ambiguous at every byte
// (`expr ::= term+ (root "+" term)*` on a long run of digits) grows by the
// nesting depths it keeps open and ends with an error instead of the memory.
constexpr size_t kMaxArena = size_t{1} << 21;
// What one byte may cost (nodes expanded, parent entries merged and hashed):
// JSON takes tens, an enum of N strings about N (so up to ~32,000 values);
// a grammar ambiguous at every byte costs more with every nesting depth it
// keeps open (quadratic time over a text) and ends with an error here, after
// a few hundred bytes, instead of stalling the engine thread.
constexpr uint64_t kMaxStepWork = uint64_t{1} << 15;
}  // namespace

void GrammarMatcher::check_step_work() const {
  if (work_done_ - step_start_ > kMaxStepWork)
    throw Error(fmt::format("the grammar is too ambiguous to follow: one byte took more than {} "
                            "parse steps (rewrite it so that a text has fewer ways to nest)",
                            kMaxStepWork));
}

void GrammarMatcher::check_arena() const {
  if (arena_size() > kMaxArena)
    throw Error(fmt::format("the grammar is too ambiguous to follow: its parse state passed {} "
                            "entries (rewrite it so that a text has fewer ways to nest)",
                            kMaxArena));
}

size_t GrammarMatcher::NodeHash::operator()(const Node& n) const {
  uint64_t h = static_cast<uint32_t>(n.rule);
  h = h * 0x9E3779B97F4A7C15ull ^ static_cast<uint32_t>(n.alt);
  h = h * 0x9E3779B97F4A7C15ull ^ static_cast<uint32_t>(n.pos);
  h = h * 0x9E3779B97F4A7C15ull ^ static_cast<uint32_t>(n.parents);
  return static_cast<size_t>(h ^ (h >> 29));
}

int32_t GrammarMatcher::intern(const Node& n) {
  const auto [it, added] = node_ids_.try_emplace(n, static_cast<int32_t>(nodes_.size()));
  if (added) {
    nodes_.push_back(n);
    check_arena();
  }
  return it->second;
}

uint64_t GrammarMatcher::set_hash(const std::vector<int32_t>& members) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int32_t m : members) h = (h ^ static_cast<uint32_t>(m)) * 0x100000001b3ull;
  return h;
}

int32_t GrammarMatcher::intern_set(const std::vector<int32_t>& members) {
  const uint64_t h = set_hash(members);
  work_done_ += members.size();
  const auto [lo, hi] = set_ids_.equal_range(h);
  for (auto it = lo; it != hi; ++it)
    if (sets_[static_cast<size_t>(it->second)] == members) return it->second;
  const auto id = static_cast<int32_t>(sets_.size());
  sets_.push_back(members);
  set_entries_ += members.size();
  set_ids_.emplace(h, id);
  check_arena();
  return id;
}

int32_t GrammarMatcher::rest_star(const Node& n) const {
  const auto& alt = g_->rules()[static_cast<size_t>(n.rule)][static_cast<size_t>(n.alt)];
  if (n.pos + 1 != static_cast<int32_t>(alt.size())) return -1;
  const Grammar::Element& el = alt[static_cast<size_t>(n.pos)];
  return el.kind == Grammar::Element::kRule && g_->is_star(el.rule) ? el.rule : -1;
}

int32_t GrammarMatcher::after(int32_t id) {
  const auto at = static_cast<size_t>(id);
  if (after_.size() <= at) after_.resize(nodes_.size(), -2);
  if (after_[at] != -2) return after_[at];
  const Node n = nodes_[at];
  const auto& alt = g_->rules()[static_cast<size_t>(n.rule)][static_cast<size_t>(n.alt)];
  int32_t result = n.parents;
  if (n.pos + 1 < static_cast<int32_t>(alt.size())) {
    Node next{n.rule, n.alt, n.pos + 1, n.parents};
    const int32_t r = rest_star(next);
    std::vector<int32_t> fold, keep;
    if (r >= 0)
      for (int32_t p : sets_[static_cast<size_t>(n.parents)])
        (p >= 0 && rest_star(nodes_[static_cast<size_t>(p)]) == r ? fold : keep).push_back(p);
    if (fold.empty()) {
      result = intern_set({intern(next)});
    } else {
      if (!keep.empty()) {
        next.parents = intern_set(keep);
        fold.push_back(intern(next));
      }
      std::sort(fold.begin(), fold.end());
      fold.erase(std::unique(fold.begin(), fold.end()), fold.end());
      result = intern_set(fold);
    }
  }
  if (after_.size() < nodes_.size()) after_.resize(nodes_.size(), -2);
  after_[at] = result;
  return result;
}

void GrammarMatcher::begin() {
  work_.clear();
  if (++epoch_ == 0) {  // wrapped: forget every mark
    std::fill(seen_.begin(), seen_.end(), 0);
    epoch_ = 1;
  }
}

void GrammarMatcher::close(std::vector<int32_t>& out) {
  // Iterative: a deep nesting of rule references must not overflow the C++ stack.
  const auto& rules = g_->rules();
  while (!work_.empty()) {
    const int32_t cur = work_.back();
    work_.pop_back();
    if (++work_done_ - step_start_ > kMaxStepWork) check_step_work();
    if (cur < 0) {
      out.push_back(-1);
      continue;
    }
    const auto at = static_cast<size_t>(cur);
    if (seen_.size() <= at) seen_.resize(nodes_.size(), 0);
    if (seen_[at] == epoch_) continue;
    seen_[at] = epoch_;
    const Node n = nodes_[at];
    const auto& alt = rules[static_cast<size_t>(n.rule)][static_cast<size_t>(n.alt)];
    if (n.pos == static_cast<int32_t>(alt.size())) {  // an empty alternative: done
      for (int32_t p : sets_[static_cast<size_t>(n.parents)]) work_.push_back(p);
      continue;
    }
    const Grammar::Element& el = alt[static_cast<size_t>(n.pos)];
    if (el.kind == Grammar::Element::kBytes) {
      out.push_back(cur);
      continue;
    }
    // The referenced rule's alternatives over what follows: the same nodes
    // whenever `cur` is expanded, so interned once and kept (expand_at_).
    if (expand_at_.size() <= at) expand_at_.resize(nodes_.size(), -1);
    if (expand_at_[at] < 0) {
      const int32_t next = after(cur);
      const auto& sub = rules[static_cast<size_t>(el.rule)];
      std::vector<int32_t> ids;
      for (size_t a = 0; a < sub.size(); ++a)
        ids.push_back(intern({el.rule, static_cast<int32_t>(a), 0, next}));
      if (expand_at_.size() < nodes_.size()) expand_at_.resize(nodes_.size(), -1);
      expand_at_[at] = static_cast<int64_t>(expanded_.size());
      expanded_.insert(expanded_.end(), ids.begin(), ids.end());
    }
    const size_t n_alts = rules[static_cast<size_t>(el.rule)].size();
    const auto from = static_cast<size_t>(expand_at_[at]);
    work_.insert(work_.end(), expanded_.begin() + static_cast<std::ptrdiff_t>(from),
                 expanded_.begin() + static_cast<std::ptrdiff_t>(from + n_alts));
  }
  // Merge the tops at each grammar position; -1 sorts first. Bucketed by
  // position (a step of an ambiguous grammar has thousands of tops here, and
  // sorting them was most of its time); a node reaches `out` once per step.
  bool bottom = false;
  touched_.clear();
  for (int32_t id : out) {
    if (id < 0) {
      bottom = true;
      continue;
    }
    const Node& n = nodes_[static_cast<size_t>(id)];
    const auto position =
        static_cast<size_t>(alt_base_[static_cast<size_t>(n.rule)][static_cast<size_t>(n.alt)] +
                            static_cast<uint32_t>(n.pos));
    auto& bucket = buckets_[position];
    if (bucket.empty()) touched_.push_back(static_cast<int32_t>(position));
    bucket.push_back(id);
  }
  merged_.clear();
  if (bottom) merged_.push_back(-1);
  std::vector<int32_t> parents;
  for (int32_t position : touched_) {
    auto& bucket = buckets_[static_cast<size_t>(position)];
    if (bucket.size() == 1) {
      merged_.push_back(bucket[0]);
    } else {
      parents.clear();
      for (int32_t id : bucket) {
        const auto& s = sets_[static_cast<size_t>(nodes_[static_cast<size_t>(id)].parents)];
        parents.insert(parents.end(), s.begin(), s.end());
        work_done_ += s.size();
        check_step_work();
      }
      std::sort(parents.begin(), parents.end());
      parents.erase(std::unique(parents.begin(), parents.end()), parents.end());
      Node m = nodes_[static_cast<size_t>(bucket[0])];
      m.parents = intern_set(parents);
      merged_.push_back(intern(m));
    }
    bucket.clear();
  }
  std::sort(merged_.begin(), merged_.end());
  merged_.erase(std::unique(merged_.begin(), merged_.end()), merged_.end());
  out.swap(merged_);
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> g) : g_(std::move(g)) {
  size_t positions = 0;
  for (const auto& rule : g_->rules()) {
    auto& bases = alt_base_.emplace_back();
    for (const auto& alt : rule) {
      bases.push_back(static_cast<uint32_t>(positions));
      positions += alt.size() + 1;
    }
  }
  buckets_.resize(positions);
  const int32_t bottom = intern_set({-1});
  const auto& root = g_->rules()[static_cast<size_t>(g_->root())];
  begin();
  for (size_t a = 0; a < root.size(); ++a)
    work_.push_back(intern({g_->root(), static_cast<int32_t>(a), 0, bottom}));
  close(stacks_);
}

void GrammarMatcher::step(const std::vector<int32_t>& stacks, uint8_t byte,
                          std::vector<int32_t>& out) {
  out.clear();
  begin();
  step_start_ = work_done_;
  const auto& rules = g_->rules();
  for (int32_t id : stacks) {
    if (id < 0) continue;
    const Node n = nodes_[static_cast<size_t>(id)];
    const Grammar::Element& el =
        rules[static_cast<size_t>(n.rule)][static_cast<size_t>(n.alt)][static_cast<size_t>(n.pos)];
    if (byte < el.lo || byte > el.hi) continue;
    const int32_t next = after(id);
    for (int32_t p : sets_[static_cast<size_t>(next)]) work_.push_back(p);
  }
  close(out);
}

bool GrammarMatcher::advance(uint8_t byte) {
  step(stacks_, byte, scratch_);
  if (scratch_.empty()) return false;
  stacks_.swap(scratch_);
  compact_if_due();
  return true;
}

bool GrammarMatcher::advance(std::string_view bytes) {
  std::vector<int32_t> cur = stacks_, next;
  for (unsigned char b : bytes) {
    step(cur, b, next);
    if (next.empty()) return false;
    cur.swap(next);
  }
  stacks_ = std::move(cur);
  compact_if_due();
  return true;
}

void GrammarMatcher::set_compaction_threshold(size_t entries) {
  compact_at_ = min_compact_at_ = entries;
}

void GrammarMatcher::compact_if_due() {
  if (arena_size() <= compact_at_) return;
  compact();
  // Amortized: the arena at least doubles between compactions, unless the
  // live state itself is near the cap (then it compacts at every advance
  // rather than throw while most of the arena is garbage).
  compact_at_ = std::min(std::max(min_compact_at_, 2 * arena_size()), kMaxArena / 2);
}

void GrammarMatcher::compact() {
  constexpr int32_t kDead = -1, kLive = -2;
  std::vector<int32_t> node_map(nodes_.size(), kDead), set_map(sets_.size(), kDead);
  std::vector<int32_t> todo;
  for (int32_t id : stacks_)
    if (id >= 0) todo.push_back(id);
  while (!todo.empty()) {
    const auto id = static_cast<size_t>(todo.back());
    todo.pop_back();
    if (node_map[id] != kDead) continue;
    node_map[id] = kLive;
    const auto set = static_cast<size_t>(nodes_[id].parents);
    if (set_map[set] != kDead) continue;
    set_map[set] = kLive;
    for (int32_t m : sets_[set])
      if (m >= 0 && node_map[static_cast<size_t>(m)] == kDead) todo.push_back(m);
  }
  int32_t n_nodes = 0, n_sets = 0;
  for (auto& m : node_map)
    if (m == kLive) m = n_nodes++;
  for (auto& m : set_map)
    if (m == kLive) m = n_sets++;
  std::vector<Node> nodes;
  nodes.reserve(static_cast<size_t>(n_nodes));
  node_ids_.clear();
  for (size_t id = 0; id < nodes_.size(); ++id) {
    if (node_map[id] < 0) continue;
    Node n = nodes_[id];
    n.parents = set_map[static_cast<size_t>(n.parents)];
    node_ids_.emplace(n, static_cast<int32_t>(nodes.size()));
    nodes.push_back(n);
  }
  std::vector<std::vector<int32_t>> sets;
  sets.reserve(static_cast<size_t>(n_sets));
  set_ids_.clear();
  set_entries_ = 0;
  for (size_t id = 0; id < sets_.size(); ++id) {
    if (set_map[id] < 0) continue;
    std::vector<int32_t> members = std::move(sets_[id]);
    for (auto& m : members)
      if (m >= 0) m = node_map[static_cast<size_t>(m)];
    set_ids_.emplace(set_hash(members), static_cast<int32_t>(sets.size()));
    set_entries_ += members.size();
    sets.push_back(std::move(members));
  }
  nodes_ = std::move(nodes);
  sets_ = std::move(sets);
  for (auto& id : stacks_)
    if (id >= 0) id = node_map[static_cast<size_t>(id)];
  // The memos name dropped ids: start them again.
  after_.clear();
  expand_at_.clear();
  expanded_.clear();
  seen_.assign(nodes_.size(), 0);
  epoch_ = 0;
  ++generation_;
}

bool GrammarMatcher::accepting() const {
  return !stacks_.empty() && stacks_.front() == -1;  // sorted: -1 first
}

bool grammar_accepts(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  GrammarMatcher m(g);
  return m.advance(text) && m.accepting();
}

}  // namespace pagellm
