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
}  // namespace

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

int32_t GrammarMatcher::intern_set(const std::vector<int32_t>& members) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int32_t m : members) h = (h ^ static_cast<uint32_t>(m)) * 0x100000001b3ull;
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
    const int32_t next = after(cur);
    const auto& sub = rules[static_cast<size_t>(el.rule)];
    for (size_t a = 0; a < sub.size(); ++a)
      work_.push_back(intern({el.rule, static_cast<int32_t>(a), 0, next}));
  }
  // Merge the tops at each grammar position; -1 sorts first.
  auto by_position = [&](int32_t a, int32_t b) {
    if (a < 0 || b < 0) return a < b;
    const Node& x = nodes_[static_cast<size_t>(a)];
    const Node& y = nodes_[static_cast<size_t>(b)];
    if (x.rule != y.rule) return x.rule < y.rule;
    if (x.alt != y.alt) return x.alt < y.alt;
    if (x.pos != y.pos) return x.pos < y.pos;
    return a < b;
  };
  std::sort(out.begin(), out.end(), by_position);
  out.erase(std::unique(out.begin(), out.end()), out.end());
  merged_.clear();
  std::vector<int32_t> parents;
  for (size_t i = 0; i < out.size();) {
    size_t j = i + 1;
    if (out[i] >= 0) {
      const Node& first = nodes_[static_cast<size_t>(out[i])];
      while (j < out.size()) {
        const Node& o = nodes_[static_cast<size_t>(out[j])];
        if (o.rule != first.rule || o.alt != first.alt || o.pos != first.pos) break;
        ++j;
      }
    }
    if (j == i + 1) {
      merged_.push_back(out[i]);
    } else {
      parents.clear();
      for (size_t k = i; k < j; ++k) {
        const auto& s = sets_[static_cast<size_t>(nodes_[static_cast<size_t>(out[k])].parents)];
        parents.insert(parents.end(), s.begin(), s.end());
      }
      std::sort(parents.begin(), parents.end());
      parents.erase(std::unique(parents.begin(), parents.end()), parents.end());
      Node m = nodes_[static_cast<size_t>(out[i])];
      m.parents = intern_set(parents);
      merged_.push_back(intern(m));
    }
    i = j;
  }
  std::sort(merged_.begin(), merged_.end());
  merged_.erase(std::unique(merged_.begin(), merged_.end()), merged_.end());
  out.swap(merged_);
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> g) : g_(std::move(g)) {
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
  return true;
}

bool GrammarMatcher::accepting() const {
  return !stacks_.empty() && stacks_.front() == -1;  // sorted: -1 first
}

bool grammar_accepts(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  GrammarMatcher m(g);
  return m.advance(text) && m.accepting();
}

}  // namespace pagellm
