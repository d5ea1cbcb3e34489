#include "tokenizer/bpe_tokenizer.h"

#include <fmt/format.h>

#include <algorithm>

#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace pagellm {

namespace {

// A run of a word's bytes: [begin, begin + len); id -1 once merged away.
struct Symbol {
  int32_t id;
  int prev;
  int next;
  uint32_t begin;
  uint32_t len;
};

// A candidate merge of symbol `left` with `right`, valid while both still
// carry the ids they had when it was found.
struct Candidate {
  int32_t rank;
  int left;
  int right;
  int32_t left_id;
  int32_t right_id;
  int32_t result;
};

// Min-heap order: lowest rank first, then the leftmost pair.
struct CandidateAfter {
  bool operator()(const Candidate& a, const Candidate& b) const {
    if (a.rank != b.rank) return a.rank > b.rank;
    return a.left > b.left;
  }
};

// `text` with each byte of every maximal ill-formed subpart replaced by U+FFFD.
std::string replace_ill_formed(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 8);
  for (size_t i = 0; i < text.size();) {
    const Utf8Scan scan = utf8_scan(text.substr(i));
    if (scan.kind == Utf8Scan::Kind::kValid) {
      out.append(text, i, scan.length);
    } else {  // kIncomplete only happens at the end; it is ill-formed there too
      for (size_t k = 0; k < scan.length; ++k) out.append(kUtf8Replacement);
    }
    i += scan.length;
  }
  return out;
}

}  // namespace

struct BpeTokenizer::Scratch {
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
};

BpeTokenizer::BpeTokenizer(Vocab vocab)
    : Tokenizer(std::move(vocab)), pre_(PreTokenizer::for_name(vocab_.pre())) {
  std::unordered_map<std::string, int32_t> extra_ids;
  for (int b = 0; b < 256; ++b) {
    byte_symbol_[b] = symbol_id(std::string(byte_level_char(static_cast<uint8_t>(b))), extra_ids);
  }
  const std::vector<std::string>& merges = vocab_.merges();
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string& m = merges[rank];
    const size_t space = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
    if (space == std::string::npos || space + 1 >= m.size()) {
      throw FormatError(
          fmt::format("tokenizer.ggml.merges[{}] is '{}', not 'left right'", rank, m));
    }
    const std::string left = m.substr(0, space), right = m.substr(space + 1);
    const int32_t l = symbol_id(left, extra_ids), r = symbol_id(right, extra_ids);
    const int32_t result = symbol_id(left + right, extra_ids);
    merges_.try_emplace(pair_key(l, r), Merge{static_cast<int32_t>(rank), result});
  }
}

int32_t BpeTokenizer::symbol_id(const std::string& text,
                                std::unordered_map<std::string, int32_t>& extra_ids) {
  const int32_t id = vocab_.find(text);
  if (id != kNoToken) return id;
  const auto [it, added] = extra_ids.try_emplace(text, vocab_.n_tokens() + n_extra_);
  if (added) ++n_extra_;
  return it->second;
}

void BpeTokenizer::encode_text(std::string_view raw, bool /*after_special*/,
                               std::vector<int32_t>& out) const {
  std::string fixed;
  std::string_view text = raw;
  if (!utf8_is_valid(raw)) {
    fixed = replace_ill_formed(raw);
    text = fixed;
  }
  Scratch scratch;
  // Words repeat a lot in long texts: each distinct word is encoded once per
  // call, later copies reuse its ids ([begin, end) in `out`).
  std::unordered_map<std::string_view, std::pair<size_t, size_t>> seen;
  for (std::string_view word : pre_.split(text)) {
    if (const auto it = seen.find(word); it != seen.end()) {
      const auto [begin, end] = it->second;
      const size_t at = out.size();
      out.resize(at + (end - begin));
      std::copy(out.begin() + begin, out.begin() + end, out.begin() + at);
      continue;
    }
    const size_t begin = out.size();
    int32_t whole = kNoToken;
    if (pre_.ignore_merges()) whole = vocab_.find(byte_level_encode(word));
    if (whole != kNoToken)
      out.push_back(whole);
    else
      encode_word(word, scratch, out);
    seen.emplace(word, std::make_pair(begin, out.size()));
  }
}

void BpeTokenizer::encode_word(std::string_view word, Scratch& s, std::vector<int32_t>& out) const {
  const int n = static_cast<int>(word.size());
  auto& syms = s.symbols;
  auto& heap = s.heap;
  syms.clear();
  heap.clear();
  for (int i = 0; i < n; ++i) {
    syms.push_back({byte_symbol_[static_cast<uint8_t>(word[i])], i - 1, i + 1 < n ? i + 1 : -1,
                    static_cast<uint32_t>(i), 1});
  }
  auto try_pair = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const auto it = merges_.find(pair_key(syms[left].id, syms[right].id));
    if (it == merges_.end()) return;
    heap.push_back(
        {it->second.rank, left, right, syms[left].id, syms[right].id, it->second.result});
    std::push_heap(heap.begin(), heap.end(), CandidateAfter{});
  };
  for (int i = 1; i < n; ++i) try_pair(i - 1, i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), CandidateAfter{});
    const Candidate c = heap.back();
    heap.pop_back();
    Symbol& l = syms[c.left];
    Symbol& r = syms[c.right];
    if (l.id != c.left_id || r.id != c.right_id || l.next != c.right) continue;
    l.id = c.result;
    l.len += r.len;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = c.left;
    r.id = -1;
    try_pair(l.prev, c.left);
    try_pair(c.left, l.next);
  }

  for (int i = n > 0 ? 0 : -1; i >= 0; i = syms[i].next) {
    const Symbol& sym = syms[i];
    if (sym.id < vocab_.n_tokens())
      out.push_back(sym.id);
    else
      emit_bytes(word.substr(sym.begin, sym.len), out);
  }
}

void BpeTokenizer::emit_bytes(std::string_view bytes, std::vector<int32_t>& out) const {
  for (char c : bytes) {
    int32_t id = byte_symbol_[static_cast<uint8_t>(c)];
    if (id >= vocab_.n_tokens()) id = vocab_.unk();
    if (id == kNoToken) {
      throw FormatError(fmt::format("vocabulary has no token for byte 0x{:02X} ('{}') and no UNK",
                                    static_cast<uint8_t>(c),
                                    byte_level_char(static_cast<uint8_t>(c))));
    }
    out.push_back(id);
  }
}

std::string BpeTokenizer::token_to_piece(int32_t id, bool special) const {
  // range-checked; byte-level BPE has no BYTE tokens of its own: they give nothing.
  if (vocab_.type(id) == TokenType::kNormal) return byte_level_decode(vocab_.text(id));
  return vocab_.verbatim_piece(id, special);
}

}  // namespace pagellm
