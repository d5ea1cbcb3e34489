// SampleOutput on its own, with a real SPM vocabulary (byte fallback tokens):
// the streamed text against a naive reference that decodes the whole prefix
// at every token and searches it for every stop string from the start.
#include "engine/sample_output.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/sampler.h"
#include "gguf/gguf_reader.h"
#include "support/test_support.h"
#include "util/error.h"

namespace pagellm {
namespace {

const Tokenizer& spm() {
  static const std::unique_ptr<Tokenizer> tok = [] {
    auto file = GgufFile::open(test::data_path("tokenizer-vectors/ggml-vocab-llama-spm.gguf"));
    return Tokenizer::from_gguf(*file);
  }();
  return *tok;
}

// The token whose piece is the one byte `b` (a byte fallback token).
int32_t byte_token(const Tokenizer& tok, unsigned char b) {
  for (int32_t id = 0; id < tok.n_vocab(); ++id)
    if (tok.token_to_piece(id) == std::string(1, static_cast<char>(b))) return id;
  ADD_FAILURE() << "no byte token for " << int(b);
  return 0;
}

size_t count_euro(const std::string& t) {
  size_t n = 0;
  for (size_t at = t.find("\xE2\x82\xAC"); at != std::string::npos; at = t.find("\xE2\x82\xAC", at + 3))
    ++n;
  return n;
}

std::vector<int32_t> words(const std::string& text) {
  return spm().encode(text, /*add_special=*/false);
}

struct Streamed {
  std::vector<std::string> texts;  // per token event, then the final event's
  std::string all;
  size_t stop_token = std::numeric_limits<size_t>::max();  // the token that stopped it
  int32_t stop_index = -1;
  int32_t event_stop_index = -1;
};

// Pushes `ids` one at a time as the engine does; the sample ends at a stop
// (reason stop) or after the last id (reason `end`).
Streamed stream(const Request& req, const std::vector<int32_t>& ids,
                FinishReason end = FinishReason::kLength) {
  SampleOutput out(spm(), req, 0, nullptr);
  Streamed s;
  FinishReason reason = end;
  for (size_t i = 0; i < ids.size(); ++i) {
    SeqEvent ev;
    ev.token = ids[i];
    if (out.push(ids[i])) {
      s.stop_token = i;
      reason = FinishReason::kStop;
      break;
    }
    out.fill_event(ev);
    s.texts.push_back(ev.text);
    s.all += ev.text;
  }
  SeqEvent last;
  out.fill_final_event(last, reason);
  s.texts.push_back(last.text);
  s.all += last.text;
  s.stop_index = out.stop_index();
  s.event_stop_index = last.stop_index;
  return s;
}

struct Expected {
  std::string text;
  size_t stop_token = std::numeric_limits<size_t>::max();
  int32_t stop_index = -1;
};

// Naive: after each token, decode everything so far and look for every stop
// from the start; the first token after which one is there stops, cut at the
// earliest match (the first listed of matches at the same place).
Expected naive(const std::vector<int32_t>& ids, const std::vector<std::string>& stops) {
  for (size_t k = 1; k <= ids.size(); ++k) {
    const std::string text = spm().decode(std::span(ids).first(k));
    size_t best = std::string::npos;
    int32_t which = -1;
    for (size_t i = 0; i < stops.size(); ++i) {
      const size_t at = text.find(stops[i]);
      if (at != std::string::npos && at < best) {
        best = at;
        which = static_cast<int32_t>(i);
      }
    }
    if (which >= 0) return {text.substr(0, best), k - 1, which};
  }
  return {spm().decode(ids)};
}

// Naive held-back rule for ASCII text: what may go out after k tokens is the
// decoded text less its longest ending that starts some stop string.
std::string naive_safe(const std::vector<int32_t>& ids, size_t k,
                       const std::vector<std::string>& stops) {
  const std::string text = spm().decode(std::span(ids).first(k));
  size_t hold = 0;
  for (const auto& s : stops)
    for (size_t len = 1; len < s.size() && len <= text.size(); ++len)
      if (text.ends_with(s.substr(0, len))) hold = std::max(hold, len);
  return text.substr(0, text.size() - hold);
}

void expect_matches_naive(const std::vector<int32_t>& ids, const std::vector<std::string>& stops) {
  Request req;
  req.stop = stops;
  const Streamed got = stream(req, ids);
  const Expected want = naive(ids, stops);
  EXPECT_EQ(got.all, want.text);
  EXPECT_EQ(got.stop_token, want.stop_token);
  EXPECT_EQ(got.stop_index, want.stop_index);
  EXPECT_EQ(got.event_stop_index, want.stop_index);
  // Before the end, each event sends exactly what no stop can claim any more.
  std::string sent;
  for (size_t k = 0; k + 1 < got.texts.size(); ++k) {
    sent += got.texts[k];
    EXPECT_EQ(sent, naive_safe(ids, k + 1, stops)) << "after token " << k;
  }
}

TEST(SampleOutput, StopStringSplitAcrossTokens) {
  const auto ids = words("Once upon a time there was a little girl named Lily.");
  // Each stop spans a token boundary ("▁upon" "▁a", "▁little" "▁girl" or finer pieces).
  for (const char* stop : {"on a ti", "tle gi", "y.", "named L"}) {
    SCOPED_TRACE(stop);
    expect_matches_naive(ids, {stop});
  }
  // The text up to the stop is not empty and does not contain it.
  Request req;
  req.stop = {"tle gi"};
  const Streamed got = stream(req, ids);
  EXPECT_EQ(got.all, " Once upon a time there was a lit");
  EXPECT_EQ(got.stop_index, 0);
}

TEST(SampleOutput, EarliestOfSeveralStops) {
  const auto ids = words("The cat sat on the mat and the dog sat on the log.");
  // Listed order is not match order: "dog" is listed first but "mat" comes
  // earlier; "at on" and "sat" match at overlapping places.
  expect_matches_naive(ids, {"dog", "mat", "log"});
  expect_matches_naive(ids, {"t on", "sat"});
  expect_matches_naive(ids, {"sat", "at on"});
  expect_matches_naive(ids, {"never", "here either"});
  // A longer stop that completes later but starts earlier wins over one that
  // completed first and starts later: both are checked on the same token.
  expect_matches_naive(ids, {"on the m", "on t"});
  Request req;
  req.stop = {"dog", "mat", "log"};
  const Streamed got = stream(req, ids);
  EXPECT_EQ(got.stop_index, 1);
  EXPECT_EQ(got.all, " The cat sat on the ");
}

TEST(SampleOutput, HeldBackTextReleasedAtTheEnd) {
  const auto ids = words("and they lived happily ever aft");
  Request req;
  req.stop = {"after all", "ever after"};
  // "ever aft" could still become "ever after": held back until the end...
  const Streamed got = stream(req, ids, FinishReason::kLength);
  std::string before_end;
  for (size_t k = 0; k + 1 < got.texts.size(); ++k) before_end += got.texts[k];
  EXPECT_EQ(before_end, naive_safe(ids, ids.size(), req.stop));
  EXPECT_FALSE(before_end.ends_with("ever aft"));
  // ...which sends it: the whole text, no stop.
  EXPECT_EQ(got.all, spm().decode(ids));
  EXPECT_EQ(got.stop_index, -1);
  EXPECT_EQ(got.event_stop_index, -1);
  // An aborted or failed sample sends nothing more.
  for (FinishReason r : {FinishReason::kAbort, FinishReason::kError}) {
    const Streamed cut = stream(req, ids, r);
    EXPECT_EQ(cut.texts.back(), "");
    EXPECT_EQ(cut.all, before_end);
  }
  expect_matches_naive(ids, req.stop);
}

TEST(SampleOutput, Utf8SplitAcrossTokens) {
  const Tokenizer& tok = spm();
  // "a€b€": the euro sign (E2 82 AC) as three byte tokens each time.
  const std::vector<int32_t> euro = {byte_token(tok, 0xE2), byte_token(tok, 0x82),
                                     byte_token(tok, 0xAC)};
  std::vector<int32_t> ids = words("a");
  ids.insert(ids.end(), euro.begin(), euro.end());
  const auto b = words("b");
  ids.insert(ids.end(), b.begin(), b.end());
  ids.insert(ids.end(), euro.begin(), euro.end());
  const std::string whole = tok.decode(ids);
  ASSERT_NE(whole.find("\xE2\x82\xAC"), std::string::npos);

  Request plain;
  const Streamed got = stream(plain, ids);
  EXPECT_EQ(got.all, whole);
  // Every event is whole characters: its bytes of the euro sign come in threes.
  for (const auto& t : got.texts) {
    const auto high = std::count_if(t.begin(), t.end(), [](char c) { return c & 0x80; });
    EXPECT_EQ(high, 3 * static_cast<long>(count_euro(t))) << "event text: " << t;
  }

  // A stop string made of a split character, and one that ends inside one.
  expect_matches_naive(ids, {"\xE2\x82\xAC" "b"});
  Request euro_stop;
  euro_stop.stop = {"b\xE2\x82\xAC"};
  const Streamed stopped = stream(euro_stop, ids);
  EXPECT_EQ(stopped.all, whole.substr(0, whole.find("b\xE2\x82\xAC")));
  EXPECT_EQ(stopped.stop_token, ids.size() - 1);  // complete only with its last byte

  // A character cut off by the end comes out as U+FFFD.
  std::vector<int32_t> cut = words("a");
  cut.push_back(euro[0]);
  cut.push_back(euro[1]);
  EXPECT_EQ(stream(plain, cut).all, tok.decode(words("a")) + "\xEF\xBF\xBD");
}

TEST(SampleOutput, EndOfGenerationStopsWithoutAStopIndex) {
  const Tokenizer& tok = spm();
  ASSERT_FALSE(tok.vocab().eog_ids().empty());
  const int32_t eog = tok.vocab().eog_ids().front();
  std::vector<int32_t> ids = words("Hello there");
  const size_t n_words = ids.size();
  ids.push_back(eog);
  ids.push_back(words(" more").front());
  Request req;
  req.stop = {"zzz"};
  const Streamed got = stream(req, ids);
  EXPECT_EQ(got.stop_token, n_words);
  EXPECT_EQ(got.stop_index, -1);
  EXPECT_EQ(got.all, tok.decode(std::span(ids).first(n_words)));
  // ignore_eos: the token is text like any other and generation goes on.
  req.ignore_eos = true;
  const Streamed on = stream(req, ids);
  EXPECT_EQ(on.stop_token, std::numeric_limits<size_t>::max());
  EXPECT_EQ(on.all, tok.decode(ids));
}

TEST(SampleOutput, PromptLogitsAndLogprobsGoOutOnce) {
  const Tokenizer& tok = spm();
  const int64_t V = tok.n_vocab();
  std::vector<float> logits(static_cast<size_t>(V), 0.0f);
  logits[100] = 5.0f;
  Request req;
  req.prompt_logits = true;
  req.logprobs = 2;
  req.sampling.temperature = 0.0f;
  SampleOutput out(tok, req, 0, nullptr);
  SampleOutput sibling = out.fork(1);
  Sampler sampler(req.sampling);
  std::vector<int32_t> history = {1};
  const float* row = out.draw_from(logits.data(), V, 0);
  const int32_t token = sampler.sample(row, static_cast<int>(V), history, 1);
  EXPECT_EQ(token, 100);
  out.drawn(token, sampler);
  out.push(token);
  SeqEvent ev;
  ev.token = token;
  out.fill_event(ev);
  EXPECT_EQ(ev.prompt_logits, logits);
  ASSERT_TRUE(ev.has_logprob);
  // log-softmax of a row of zeros and one 5: reference in double.
  const double lse = std::log(std::exp(5.0) + static_cast<double>(V - 1));
  EXPECT_NEAR(ev.logprob, 5.0 - lse, 1e-5);
  ASSERT_EQ(ev.top_logprobs.size(), 2u);
  EXPECT_EQ(ev.top_logprobs[0].token, 100);
  // Sample 0's first event alone carries the prompt's logits.
  SeqEvent second;
  second.token = token;
  out.fill_event(second);
  EXPECT_TRUE(second.prompt_logits.empty());
  sibling.draw_from(logits.data(), V, 0);
  SeqEvent sib;
  sib.token = token;
  sibling.fill_event(sib);
  EXPECT_TRUE(sib.prompt_logits.empty());
  EXPECT_FALSE(sib.has_logprob);  // nothing drawn yet
}

TEST(SampleOutput, GrammarMasksAndForksCarryItsState) {
  const Tokenizer& tok = spm();
  const auto vocab = make_grammar_vocab(tok);
  Request req;
  req.grammar = Grammar::parse("root ::= \"ab\" \"c\"*");
  const int64_t V = tok.n_vocab();
  const std::vector<float> flat(static_cast<size_t>(V), 0.0f);
  SampleOutput out(tok, req, 0, vocab);
  // Allowed first: exactly the tokens whose bytes start "ab" within the language.
  const float* row = out.draw_from(flat.data(), V, 0);
  int64_t allowed = 0;
  for (int32_t id = 0; id < V; ++id) {
    const std::string& b = vocab->bytes(id);
    const bool in = !b.empty() && (std::string("ab").starts_with(b) ||
                                   (b.starts_with("ab") &&
                                    b.find_first_not_of('c', 2) == std::string::npos));
    EXPECT_EQ(row[id] == 0.0f, in) << "token " << id << " '" << b << "'";
    allowed += in;
  }
  EXPECT_GT(allowed, 0);
  // Consume "a": a fork goes on from there, the original too.
  const int32_t a = byte_token(tok, 'a');
  Sampler sampler(req.sampling);
  out.drawn(a, sampler);
  SampleOutput fork = out.fork(1);
  for (SampleOutput* o : {&out, &fork}) {
    const float* r = o->draw_from(flat.data(), V, 1);
    for (int32_t id = 0; id < V; ++id) {
      const std::string& b = vocab->bytes(id);
      const bool in = !b.empty() && b[0] == 'b' &&
                      b.find_first_not_of('c', 1) == std::string::npos;
      EXPECT_EQ(r[id] == 0.0f, in) << "token " << id;
    }
  }
  EXPECT_THROW(fork.drawn(a, sampler), Error);  // "a" is outside the grammar here
}

TEST(SampleOutput, PreparedMasksEqualMasksComputedWhenDrawing) {
  // A sample whose masks are prepared ahead (off the engine thread in the
  // engine) draws from the same logits as its twin that computes them while
  // drawing, and fails at the same token with the same error: a grammar
  // too ambiguous to follow throws inside the prepared mask walk, and the
  // error comes out of draw_from, not out of prepare_mask.
  const Tokenizer& tok = spm();
  const auto vocab = make_grammar_vocab(tok);
  Request req;
  req.grammar = Grammar::parse(R"G(
root ::= expr
expr ::= term+ (root ("+" | "-") term)*
term ::= [0-9]+ | "(" expr ")"
)G");
  const int64_t V = tok.n_vocab();
  std::vector<float> flat(static_cast<size_t>(V));
  for (int64_t i = 0; i < V; ++i) flat[static_cast<size_t>(i)] = static_cast<float>(i % 7);
  auto cache = std::make_shared<MaskCache>();
  SampleOutput prepared(tok, req, 0, vocab, cache), plain(tok, req, 0, vocab);
  Sampler sampler(req.sampling);
  const int32_t one = byte_token(tok, '1');
  std::string prepared_error, plain_error;
  int steps = 0;
  for (; steps < 5000 && prepared_error.empty() && plain_error.empty(); ++steps) {
    prepared.prepare_mask();
    std::vector<float> a, b;
    try {
      const float* r = prepared.draw_from(flat.data(), V, steps);
      a.assign(r, r + V);
    } catch (const Error& e) {
      prepared_error = e.what();
    }
    try {
      const float* r = plain.draw_from(flat.data(), V, steps);
      b.assign(r, r + V);
    } catch (const Error& e) {
      plain_error = e.what();
    }
    ASSERT_EQ(a, b) << "step " << steps;
    if (a.empty()) break;
    try {
      prepared.drawn(one, sampler);
    } catch (const Error& e) {
      prepared_error = e.what();
    }
    try {
      plain.drawn(one, sampler);
    } catch (const Error& e) {
      plain_error = e.what();
    }
  }
  EXPECT_EQ(prepared_error, plain_error);
  EXPECT_NE(prepared_error.find("too ambiguous"), std::string::npos) << steps << ": " << prepared_error;
  EXPECT_GT(steps, 100);
}

}  // namespace
}  // namespace pagellm
