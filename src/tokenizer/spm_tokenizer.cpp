#include "tokenizer/spm_tokenizer.h"

#include <fmt/format.h>

#include <queue>

#include "tokenizer/detokenizer.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace pagellm {

namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

// A run of the text: [offset, offset + length); length 0 once merged away.
struct Symbol {
  int prev;
  int next;
  size_t offset;
  size_t length;
};

// A candidate merge of `left` with the symbol after it.
struct Pair {
  int left;
  int right;
  float score;
  size_t length;  // of the merged text; detects pairs made stale by other merges
};

// Max-heap order: higher score first, then the leftmost pair.
struct PairOrder {
  bool operator()(const Pair& a, const Pair& b) const {
    if (a.score != b.score) return a.score < b.score;
    return a.left > b.left;
  }
};

}  // namespace

void SpmTokenizer::encode_text(std::string_view raw, bool after_special,
                               std::vector<int32_t>& out) const {
  std::string text;
  text.reserve(raw.size() * 2 + kSpace.size());
  if (vocab_.add_space_prefix() && after_special) text.append(kSpace);
  for (char c : raw) {
    if (c == ' ')
      text.append(kSpace);
    else
      text.push_back(c);
  }

  std::vector<Symbol> symbols;
  symbols.reserve(text.size());
  for (size_t off = 0; off < text.size();) {
    const size_t len =
        std::min(utf8_lead_length(static_cast<uint8_t>(text[off])), text.size() - off);
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({index - 1, off + len < text.size() ? index + 1 : -1, off, len});
    off += len;
  }

  std::priority_queue<Pair, std::vector<Pair>, PairOrder> queue;
  auto try_pair = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[left];
    const Symbol& r = symbols[right];
    const std::string_view merged(text.data() + l.offset, l.length + r.length);
    const int32_t id = vocab_.find(merged);
    if (id == kNoToken) return;
    queue.push({left, right, vocab_.score(id), merged.size()});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_pair(i - 1, i);

  while (!queue.empty()) {
    const Pair p = queue.top();
    queue.pop();
    Symbol& l = symbols[p.left];
    Symbol& r = symbols[p.right];
    if (l.length == 0 || r.length == 0 || l.length + r.length != p.length) continue;
    l.length += r.length;
    r.length = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = p.left;
    try_pair(l.prev, p.left);
    try_pair(p.left, l.next);
  }

  for (int i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[i].next) {
    const std::string_view piece(text.data() + symbols[i].offset, symbols[i].length);
    const int32_t id = vocab_.find(piece);
    if (id != kNoToken)
      out.push_back(id);
    else
      emit_bytes(piece, out);
  }
}

void SpmTokenizer::emit_bytes(std::string_view piece, std::vector<int32_t>& out) const {
  for (char c : piece) {
    const auto byte = static_cast<uint8_t>(c);
    int32_t id = vocab_.byte_token(byte);
    if (id == kNoToken) id = vocab_.find(std::string_view(&c, 1));
    if (id == kNoToken) id = vocab_.unk();
    if (id == kNoToken) {
      throw FormatError(
          fmt::format("vocabulary has no token for byte 0x{:02X} (no <0x{:02X}> token and no UNK)",
                      byte, byte));
    }
    out.push_back(id);
  }
}

std::string SpmTokenizer::token_to_piece(int32_t id, bool special) const {
  return spm_token_to_piece(vocab_, id, special);
}

}  // namespace pagellm
