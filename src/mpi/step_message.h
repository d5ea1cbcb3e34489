// One pipeline step as it travels between processes (MPI ranks): the batch
// (tokens, positions, which sequence each token belongs to, which want
// logits), every sequence's block table per KV group, the copy-on-write
// copies, and the hidden state entering the receiving stage. Slots are not
// sent: the receiver derives them from the tables, so a malformed message
// cannot point a write outside its pools. decode_step() checks every count,
// id and length against the receiver's own limits and throws FormatError
// naming the first problem; nothing from another rank is trusted.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/batch.h"

namespace pagellm {

enum class StepKind : uint32_t { kStep = 1, kShutdown = 2, kError = 3, kLogits = 4 };

// What the receiving stage accepts.
struct StepLimits {
  int32_t n_vocab = 0;
  int32_t n_embd = 0;
  int32_t block_size = 16;
  std::vector<int32_t> group_blocks;  // blocks per KV group (group 0 first)
  int64_t max_tokens = 0;             // tokens per step
  int64_t max_logit_rows = 0;
  // Recurrent layers' state slots of the model (0: it has none).
  int32_t state_slots = 0;
};

struct DecodedStep {
  StepKind kind = StepKind::kStep;
  Batch batch;                     // block_tables point into `tables`
  std::vector<BlockTable> tables;  // one per sequence
  std::vector<float> payload;      // kStep: hidden [n_tokens][n_embd]; kLogits: [rows][n_vocab]
  std::string error;               // kError
  double compute_s = 0;            // kStep, kLogits
};

// `compute_s`: seconds the stages so far spent computing this step (the
// benchmark's split of a step's time into compute and communication).
std::vector<uint8_t> encode_step(const Batch& batch, std::span<const float> hidden,
                                 double compute_s = 0);
std::vector<uint8_t> encode_logits(std::span<const float> logits, double compute_s = 0);
std::vector<uint8_t> encode_control(StepKind kind, std::string_view error = {});
// kLogits: `expect_values` floats exactly (the rows rank 0 asked for).
void decode_step(std::span<const uint8_t> bytes, const StepLimits& limits, DecodedStep& out,
                 int64_t expect_values = -1);

}  // namespace pagellm
