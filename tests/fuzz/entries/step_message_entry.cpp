// A pipeline step message as another MPI rank might send it (mpi/
// step_message.h), decoded against a stage's limits: 2 KV groups of 64 and 16
// blocks of 16, 512-token vocabulary, 32-wide hidden state, 8 recurrent-state
// slots. What is accepted
// must address only its pools (every slot inside them), and must encode back
// to a message that decodes to the same step.
#include "mpi/step_message.h"
#include "entries/fuzz_entries.h"
#include "util/error.h"

namespace pagellm::fuzz {

int step_message(const uint8_t* data, size_t size) {
  if (size > (1 << 16)) return 0;
  StepLimits lim;
  lim.n_vocab = 512;
  lim.n_embd = 32;
  lim.block_size = 16;
  lim.group_blocks = {64, 16};
  lim.max_tokens = 128;
  lim.max_logit_rows = 32;
  lim.state_slots = 8;  // recurrent layers' slots (hybrid models)
  DecodedStep step;
  try {
    decode_step({data, size}, lim, step);
  } catch (const Error&) {
    return 0;
  }
  if (step.kind != StepKind::kStep) return 0;
  const Batch& b = step.batch;
  for (int64_t s : b.slots)
    if (s < 0 || s >= 64 * 16) violated("a slot outside group 0's pool");
  for (int32_t s : b.state_slots)
    if (s < 0 || s >= 8) violated("a state slot outside the pools");
  for (const auto* pairs : {&b.state_saves, &b.state_copies})
    for (const auto& [src, dst] : *pairs)
      if (src < 0 || src >= 8 || dst < 0 || dst >= 8) violated("a state copy outside the pools");
  for (const auto& g : b.more_slots)
    for (int64_t s : g)
      if (s < 0 || s >= 16 * 16) violated("a slot outside group 1's pool");
  const auto again = encode_step(b, step.payload);
  DecodedStep round;
  try {
    decode_step(again, lim, round);
  } catch (const Error&) {
    violated("an accepted step does not decode after encoding");
  }
  if (round.batch.tokens != b.tokens || round.batch.positions != b.positions ||
      round.batch.slots != b.slots || round.batch.logit_tokens != b.logit_tokens ||
      round.batch.more_slots != b.more_slots || round.payload.size() != step.payload.size())
    violated("a step changed through encode and decode");
  return 0;
}

}  // namespace pagellm::fuzz
