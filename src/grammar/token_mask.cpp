#include "grammar/token_mask.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <string_view>

namespace pagellm {

GrammarVocab::GrammarVocab(std::vector<std::string> token_bytes, std::vector<int32_t> eog_ids)
    : bytes_(std::move(token_bytes)), eog_(std::move(eog_ids)) {
  std::sort(eog_.begin(), eog_.end());
  eog_.erase(std::unique(eog_.begin(), eog_.end()), eog_.end());
  std::vector<int32_t> order(bytes_.size());
  std::iota(order.begin(), order.end(), 0);
  // Sorted by bytes (unsigned), so a node's new child is always its last.
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return std::lexicographical_compare(
        bytes_[static_cast<size_t>(a)].begin(), bytes_[static_cast<size_t>(a)].end(),
        bytes_[static_cast<size_t>(b)].begin(), bytes_[static_cast<size_t>(b)].end(),
        [](char x, char y) { return static_cast<uint8_t>(x) < static_cast<uint8_t>(y); });
  });
  trie_.emplace_back();
  std::vector<int32_t> token_node(bytes_.size(), -1), parent = {-1};
  for (int32_t id : order) {
    const std::string& s = bytes_[static_cast<size_t>(id)];
    if (s.empty() || is_eog(id)) continue;
    int32_t node = 0;
    for (unsigned char b : s) {
      auto& ch = trie_[static_cast<size_t>(node)].children;
      if (!ch.empty() && ch.back().byte == b) {
        node = ch.back().node;
      } else {
        const int32_t next = static_cast<int32_t>(trie_.size());
        ch.push_back({b, 0, next});
        trie_.emplace_back();
        parent.push_back(node);
        node = next;
      }
    }
    trie_[static_cast<size_t>(node)].tokens.push_back(id);
    token_node[static_cast<size_t>(id)] = node;
  }
  std::vector<uint16_t> walk_masks;
  classes_ = TokenClasses(bytes_, token_node, parent, walk_masks);
  for (TrieNode& n : trie_)
    for (TrieEdge& e : n.children) e.walk_mask = walk_masks[static_cast<size_t>(e.node)];
}

bool GrammarVocab::is_eog(int32_t id) const {
  return std::binary_search(eog_.begin(), eog_.end(), id);
}

size_t TokenMasker::VecHash::operator()(const std::vector<int32_t>& v) const {
  uint64_t h = v.size();
  for (int32_t x : v) h = (h ^ static_cast<uint32_t>(x)) * 0x100000001B3ull;
  return static_cast<size_t>(h ^ (h >> 31));
}

TokenMasker::TokenMasker(std::shared_ptr<const GrammarVocab> vocab,
                         std::shared_ptr<MaskCache> cache)
    : vocab_(std::move(vocab)),
      cache_(cache ? std::move(cache) : std::make_shared<MaskCache>()) {
  // Off for an end-to-end before/after (bench/grammar_bench.sh).
  static const bool classes = [] {
    const char* env = std::getenv("PAGELLM_MASK_CLASSES");
    return !(env && std::string_view(env) == "0");
  }();
  class_skip_ = classes;
}

const TokenMask& TokenMasker::mask(GrammarMatcher& m) {
  current_ = shared_mask(m);
  return *current_;
}

void TokenMasker::follow(const GrammarMatcher& m) {
  if (m.generation() != generation_) {  // the matcher renumbered its states
    forget_states();
    generation_ = m.generation();
  }
}

void TokenMasker::compute_uncached(GrammarMatcher& m, TokenMask& out) {
  follow(m);
  compute(m, out);
}

std::shared_ptr<const TokenMask> TokenMasker::shared_mask(GrammarMatcher& m) {
  follow(m);
  if (canon_of_ != &m.grammar()) {
    canon_ = cache_->canon(m.shared_grammar());
    canon_of_ = &m.grammar();
    memo_ = {};
  }
  uint64_t uid = 0;
  canon_->key(m, memo_, key_, &uid);
  if (auto hit = cache_->find(uid, key_)) {
    ++hits_;
    return hit;
  }
  ++misses_;
  auto out = std::make_shared<TokenMask>();
  compute(m, *out);
  return cache_->insert(uid, key_, std::move(out));
}

void TokenMasker::forget_states() {
  state_ids_.clear();
  states_.clear();
  steps_.clear();
}

int32_t TokenMasker::intern_state(const std::vector<int32_t>& stacks) {
  const auto [it, added] = state_ids_.try_emplace(stacks, static_cast<int32_t>(states_.size()));
  if (added) {
    states_.push_back(&it->first);  // node keys keep their address in an unordered_map
    steps_.resize(steps_.size() + 256, kUnknown);
  }
  return it->second;
}

int32_t TokenMasker::next_state(GrammarMatcher& m, int32_t from, uint8_t byte) {
  const size_t at = static_cast<size_t>(from) * 256 + byte;
  if (steps_[at] != kUnknown) return steps_[at];
  m.step(*states_[static_cast<size_t>(from)], byte, scratch_);
  // Interning may grow steps_: write through the index afterwards.
  const int32_t next = scratch_.empty() ? kDead : intern_state(scratch_);
  steps_[at] = next;
  return next;
}

ClassSet TokenMasker::admitted_classes(GrammarMatcher& m) {
  follow(m);
  return admitted_classes(m, intern_state(m.stacks()));
}

ClassSet TokenMasker::admitted_classes(GrammarMatcher& m, int32_t state) {
  // Every string of the class's bytes up to its longest token is taken iff
  // every state such a shorter string reaches takes every byte: breadth
  // first over the states by the fewest bytes that reach them (a state
  // first reached at the longest length is not checked). Unbounded text
  // comes back to a state already seen; a bounded repetition (maxLength,
  // {0,15}) steps through new ones, so a few are allowed, then it gives up
  // (the walk is exact either way).
  constexpr size_t kMaxClassStates = 16;
  const TokenClasses& classes = vocab_->classes();
  ClassSet admitted = 0;
  std::array<int32_t, kMaxClassStates> reached{};
  std::array<size_t, kMaxClassStates> depth{};
  // A quick refusal first, a few steps instead of every byte from every
  // state: the class's first byte over and over. Dying before `longest`
  // refuses a string of the class; more than kMaxClassStates states on the
  // way would overflow the search below too (each is reached by a shorter
  // string). Coming back to a state leaves it to the search.
  auto chain_refuses = [&](uint8_t b, size_t longest) {
    size_t n = 1;
    reached[0] = state;
    for (size_t d = 0; d < longest; ++d) {
      const int32_t next = next_state(m, reached[n - 1], b);
      if (next == kDead) return true;
      const auto end = reached.begin() + static_cast<std::ptrdiff_t>(n);
      if (d + 1 == longest || std::find(reached.begin(), end, next) != end) return false;
      if (n == kMaxClassStates) return true;
      reached[n++] = next;
    }
    return false;
  };
  for (int c = 0; c < kTokenClasses; ++c) {
    const size_t longest = classes.max_length(c);
    if (longest == 0 || chain_refuses(token_class_bytes(c)[0], longest)) continue;
    reached[0] = state;
    depth[0] = 0;
    size_t n = 1;
    bool all = true;
    for (size_t i = 0; i < n && all; ++i) {
      // Every state here is first reached by fewer bytes than `longest`.
      const bool last = depth[i] + 1 == longest;
      for (uint8_t b : token_class_bytes(c)) {
        const int32_t next = next_state(m, reached[i], b);
        if (next == kDead) {
          all = false;
          break;
        }
        const auto end = reached.begin() + static_cast<std::ptrdiff_t>(n);
        if (last || std::find(reached.begin(), end, next) != end) continue;
        if (n == kMaxClassStates) {
          all = false;
          break;
        }
        depth[n] = depth[i] + 1;
        reached[n++] = next;
      }
    }
    if (all) admitted |= static_cast<ClassSet>(1u << c);
  }
  return admitted;
}

void TokenMasker::compute(GrammarMatcher& m, TokenMask& out) {
  const GrammarVocab& v = *vocab_;
  out.assign((static_cast<size_t>(v.n_tokens()) + 63) / 64, 0);
  auto allow = [&](int32_t id) { out[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63); };
  if (m.accepting())
    for (int32_t id : v.eog_ids()) allow(id);
  // Bounded memory: a grammar whose states never repeat starts the table again.
  constexpr size_t kMaxStates = 1 << 14;
  if (states_.size() >= kMaxStates) forget_states();
  const auto& trie = v.trie();
  // Depth-first over the trie with the grammar's state after each prefix.
  struct Frame {
    int32_t node;
    int32_t state;
    size_t child;
  };
  const int32_t start = intern_state(m.stacks());
  const ClassSet admitted = class_skip_ ? admitted_classes(m, start) : 0;
  for (int c = 0; c < kTokenClasses; ++c) {
    if (!((admitted >> c) & 1)) continue;
    const auto& members = v.classes().members(c);
    for (size_t w = 0; w < out.size(); ++w) out[w] |= members[w];
  }
  std::vector<Frame> path = {{0, start, 0}};
  while (!path.empty()) {
    Frame& f = path.back();
    const auto& children = trie[static_cast<size_t>(f.node)].children;
    if (f.child == children.size()) {
      path.pop_back();
      continue;
    }
    const auto [byte, walk_mask, child] = children[f.child++];
    if (!TokenClasses::walk_needed(walk_mask, admitted)) continue;  // set with its classes
    const int32_t next = next_state(m, f.state, byte);
    if (next == kDead) continue;  // no token below this prefix is allowed
    for (int32_t id : trie[static_cast<size_t>(child)].tokens) allow(id);
    path.push_back({child, next, 0});
  }
}

int64_t TokenMasker::apply(const TokenMask& mask, float* logits, int64_t n) {
  // A word at a time: masks are mostly all-allowed (free text inside a
  // string) or all-refused (structure) runs of 64 tokens.
  int64_t allowed = 0;
  const float ninf = -std::numeric_limits<float>::infinity();
  for (int64_t base = 0; base < n; base += 64) {
    const int64_t len = std::min<int64_t>(64, n - base);
    const uint64_t word = mask[static_cast<size_t>(base >> 6)] &
                          (len == 64 ? ~uint64_t{0} : (uint64_t{1} << len) - 1);
    allowed += std::popcount(word);
    if (word == (len == 64 ? ~uint64_t{0} : (uint64_t{1} << len) - 1)) continue;
    float* row = logits + base;
    if (word == 0) {
      std::fill(row, row + len, ninf);
      continue;
    }
    for (int64_t i = 0; i < len; ++i)
      if (!((word >> i) & 1)) row[i] = ninf;
  }
  return allowed;
}

}  // namespace pagellm
