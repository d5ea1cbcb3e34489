// Step messages between pipeline ranks: a step survives encode/decode with
// its slots derived from the tables; every truncation and a corrupted byte
// at every position are refused with FormatError or decode to a step that
// stays inside the limits (never a crash or a slot outside the pools).
#include "mpi/step_message.h"

#include <gtest/gtest.h>

#include "support/test_support.h"
#include "util/error.h"

#include <filesystem>
#include <fstream>
#include <iterator>

namespace pagellm {
namespace {

StepLimits limits() {
  StepLimits l;
  l.n_vocab = 512;
  l.n_embd = 8;
  l.block_size = 16;
  l.group_blocks = {32, 8};
  l.max_tokens = 64;
  l.max_logit_rows = 16;
  return l;
}

struct Step {
  std::vector<BlockTable> tables;
  Batch batch;
  std::vector<float> hidden;
};

Step make_step() {
  Step s;
  for (int i = 0; i < 2; ++i) {
    s.tables.emplace_back(16);
    s.tables.back().set_groups(2);
  }
  s.tables[0].group_blocks(0) = {3, 7};
  s.tables[0].group_blocks(1) = {BlockTable::kNoBlock, 2};
  s.tables[1].group_blocks(0) = {5};
  s.tables[1].group_blocks(1) = {6};
  for (auto& t : s.tables) s.batch.add_sequence(t);
  s.batch.add_token(0, 11, 20, false);
  s.batch.add_token(0, 12, 21, true);
  s.batch.add_token(1, 13, 4, true);
  s.batch.copies = {{1, 5, 0}, {4, 6, 1}};
  for (int i = 0; i < 3 * 8; ++i) s.hidden.push_back(0.5f * static_cast<float>(i));
  return s;
}

TEST(StepMessage, RoundTrip) {
  Step s = make_step();
  const auto bytes = encode_step(s.batch, s.hidden);
  DecodedStep d;
  decode_step(bytes, limits(), d);
  EXPECT_EQ(d.kind, StepKind::kStep);
  EXPECT_EQ(d.batch.tokens, s.batch.tokens);
  EXPECT_EQ(d.batch.positions, s.batch.positions);
  EXPECT_EQ(d.batch.token_seq, s.batch.token_seq);
  EXPECT_EQ(d.batch.slots, s.batch.slots);  // derived on the receiving side
  EXPECT_EQ(d.batch.more_slots, s.batch.more_slots);
  EXPECT_EQ(d.batch.logit_tokens, s.batch.logit_tokens);
  ASSERT_EQ(d.batch.copies.size(), 2u);
  EXPECT_EQ(d.batch.copies[1].group, 1);
  EXPECT_EQ(d.payload, s.hidden);

  const std::vector<float> logits(2 * 512, 0.25f);
  decode_step(encode_logits(logits), limits(), d, 2 * 512);
  EXPECT_EQ(d.kind, StepKind::kLogits);
  EXPECT_EQ(d.payload, logits);
  EXPECT_THROW(decode_step(encode_logits(logits), limits(), d, 512), FormatError);
  decode_step(encode_control(StepKind::kError, "rank 2: boom"), limits(), d);
  EXPECT_EQ(d.kind, StepKind::kError);
  EXPECT_EQ(d.error, "rank 2: boom");
}

TEST(StepMessage, RefusesWhatBreaksTheLimits) {
  Step s = make_step();
  DecodedStep d;
  StepLimits small = limits();
  small.group_blocks = {6, 8};  // block 7 of sequence 0 is outside
  EXPECT_THROW(decode_step(encode_step(s.batch, s.hidden), small, d), FormatError);
  small = limits();
  small.n_vocab = 12;  // token 13
  EXPECT_THROW(decode_step(encode_step(s.batch, s.hidden), small, d), FormatError);
  small = limits();
  small.n_embd = 4;  // hidden of the wrong width
  EXPECT_THROW(decode_step(encode_step(s.batch, s.hidden), small, d), FormatError);
  small = limits();
  small.group_blocks = {32};  // one KV group here
  EXPECT_THROW(decode_step(encode_step(s.batch, s.hidden), small, d), FormatError);
  const std::vector<float> bad_hidden(5);
  EXPECT_THROW(decode_step(encode_step(s.batch, bad_hidden), limits(), d), FormatError);
}

TEST(StepMessage, EveryTruncationAndCorruptionIsSafe) {
  Step s = make_step();
  const auto bytes = encode_step(s.batch, s.hidden);
  DecodedStep d;
  for (size_t n = 0; n < bytes.size(); ++n)
    EXPECT_THROW(decode_step(std::span(bytes).first(n), limits(), d), FormatError) << n;
  int refused = 0;
  for (size_t i = 0; i < bytes.size(); ++i)
    for (uint8_t x : {0x01, 0x80, 0xff}) {
      auto bad = bytes;
      bad[i] ^= x;
      try {
        decode_step(bad, limits(), d);
        for (int64_t slot : d.batch.slots) ASSERT_LT(slot, 32 * 16);
        for (const auto& g : d.batch.more_slots)
          for (int64_t slot : g) ASSERT_LT(slot, 8 * 16);
      } catch (const FormatError&) {
        ++refused;
      }
    }
  EXPECT_GT(refused, 100);
}

// Recurrent layers' part: each sequence's state slot and decode start, the
// resets, checkpoint saves and copies survive the trip; slots outside the
// receiver's pools, shared slots and state for a model without recurrent
// layers are refused; corruptions never yield a slot outside the pools.
TEST(StepMessage, RecurrentStateRoundTripAndLimits) {
  Step s = make_step();
  s.batch.state_slots = {2, 0};
  s.batch.step_from = {21, 3};
  s.batch.state_resets = {0};
  s.batch.state_saves = {{2, 5}};
  s.batch.state_copies = {{4, 2}};
  StepLimits lim = limits();
  lim.state_slots = 6;
  const auto bytes = encode_step(s.batch, s.hidden);
  DecodedStep d;
  decode_step(bytes, lim, d);
  EXPECT_EQ(d.batch.state_slots, s.batch.state_slots);
  EXPECT_EQ(d.batch.step_from, s.batch.step_from);
  EXPECT_EQ(d.batch.state_resets, s.batch.state_resets);
  EXPECT_EQ(d.batch.state_saves, s.batch.state_saves);
  EXPECT_EQ(d.batch.state_copies, s.batch.state_copies);
  // Without state fields the message decodes with none.
  decode_step(encode_step(make_step().batch, s.hidden), lim, d);
  EXPECT_TRUE(d.batch.state_slots.empty());

  EXPECT_THROW(decode_step(bytes, limits(), d), FormatError);  // no recurrent layers here
  lim.state_slots = 5;  // slot 5 (a save's target) is outside
  EXPECT_THROW(decode_step(bytes, lim, d), FormatError);
  lim.state_slots = 6;
  Step shared = make_step();
  shared.batch.state_slots = {1, 1};
  shared.batch.step_from = {0, 0};
  EXPECT_THROW(decode_step(encode_step(shared.batch, s.hidden), lim, d), FormatError);
  for (size_t i = 0; i < bytes.size(); ++i) {
    auto bad = bytes;
    bad[i] ^= 0x80;
    try {
      decode_step(bad, lim, d);
      for (int32_t slot : d.batch.state_slots) ASSERT_TRUE(slot >= 0 && slot < 6);
      for (const auto& [a, b] : d.batch.state_copies) ASSERT_TRUE(a >= 0 && a < 6 && b >= 0 && b < 6);
    } catch (const FormatError&) {
    }
  }
}

// MLA without recurrent layers: the prompt ends travel alone (state flag 2),
// also to a model without state slots; a negative one is refused.
TEST(StepMessage, PromptEndsWithoutStateRoundTrip) {
  Step s = make_step();
  s.batch.step_from = {21, 3};
  DecodedStep d;
  decode_step(encode_step(s.batch, s.hidden), limits(), d);
  EXPECT_EQ(d.batch.step_from, s.batch.step_from);
  EXPECT_TRUE(d.batch.state_slots.empty());
  s.batch.step_from = {21, -1};
  EXPECT_THROW(decode_step(encode_step(s.batch, s.hidden), limits(), d), FormatError);
}

// The committed fuzz seeds speak this build's version: every step among them
// decodes against the fuzz entry's limits (a stale seed would only test the
// version check).
TEST(StepMessage, TheFuzzSeedsAreCurrentSteps) {
  const auto dir = std::filesystem::path(test::data_path("")) / ".." / "fuzz" / "corpus" / "step_message";
  StepLimits lim;
  lim.n_vocab = 512;
  lim.n_embd = 32;
  lim.block_size = 16;
  lim.group_blocks = {64, 16};
  lim.max_tokens = 128;
  lim.max_logit_rows = 32;
  lim.state_slots = 8;
  int steps = 0, with_state = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(e.path(), std::ios::binary);
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    DecodedStep d;
    ASSERT_NO_THROW(decode_step(bytes, lim, d)) << e.path();
    if (d.kind == StepKind::kStep) ++steps;
    if (!d.batch.state_slots.empty()) ++with_state;
  }
  EXPECT_GE(steps, 5);
  EXPECT_GE(with_state, 1);
}

}  // namespace
}  // namespace pagellm
