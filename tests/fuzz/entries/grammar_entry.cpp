// A GBNF grammar, optionally followed by a NUL byte and text: the grammar is
// parsed and compiled (refusals are GrammarErrors with an offset inside the
// text); an accepted grammar is matched against the text byte by byte and
// masks a small vocabulary, whose masks must agree with advancing by each
// token's bytes. The one refusal allowed mid-text is a grammar too ambiguous
// to follow (an Error that says so, the state kept).
#include <cstring>
#include <string>

#include "entries/fuzz_entries.h"
#include "grammar/grammar_matcher.h"
#include "grammar/token_mask.h"
#include "util/error.h"

namespace pagellm::fuzz {

namespace {

// Pieces of every byte class the masks set whole (grammar/token_classes.h)
// and of none.
const std::vector<std::string> kPieces = {"", "a", "b", "ab", "{", "}", "\"", " ", "0",
                                          "12", "-", "\xc3\xa9", "\xc3", "x", "\n",
                                          "1 a", " \t", "99", "a\"", "~!"};

void walk(GrammarMatcher& m, TokenMasker& masker, const GrammarVocab& vocab,
          const std::string& input) {
  size_t steps = 0;
  for (unsigned char b : input) {
    // A budget per input (an ambiguous grammar costs more per byte with
    // every nesting it keeps open): the matcher's own cap is per byte.
    if (++steps > 256 || m.arena_size() > 200000 || m.work_done() > (uint64_t{1} << 18)) break;
    const TokenMask& mask = masker.mask(m);
    for (int32_t id = 1; id < vocab.n_tokens(); ++id) {
      std::vector<int32_t> cur = m.stacks(), next;
      bool ok = true;
      for (unsigned char c : kPieces[static_cast<size_t>(id)]) {
        m.step(cur, c, next);
        if (next.empty()) {
          ok = false;
          break;
        }
        cur.swap(next);
      }
      if (ok != mask_allows(mask, id)) violated("a token mask disagrees with the matcher");
    }
    if (mask_allows(mask, 0) != m.accepting()) violated("end-of-generation outside an accepting state");
    const auto before = m.stacks();
    const uint64_t generation = m.generation();
    try {
      if (!m.advance(b)) break;
    } catch (const Error&) {
      if (m.generation() == generation && m.stacks() != before)
        violated("a refused byte changed the state");
      throw;
    }
  }
}

}  // namespace

int grammar(const uint8_t* data, size_t size) {
  if (size > 16384) return 0;
  const std::string all(reinterpret_cast<const char*>(data), size);
  const size_t nul = all.find('\0');
  const std::string text = all.substr(0, nul);
  const std::string input = nul == std::string::npos ? "" : all.substr(nul + 1);
  std::shared_ptr<const Grammar> g;
  try {
    g = Grammar::parse(text);
  } catch (const GrammarError& e) {
    if (e.offset() > text.size()) violated("a grammar error's offset is past the text");
    return 0;
  }
  GrammarMatcher m(g);
  auto vocab = std::make_shared<GrammarVocab>(kPieces, std::vector<int32_t>{0});
  TokenMasker masker(vocab);
  try {
    walk(m, masker, *vocab, input);
  } catch (const Error& e) {
    if (std::string(e.what()).find("too ambiguous") == std::string::npos) throw;
  }
  return 0;
}

}  // namespace pagellm::fuzz
