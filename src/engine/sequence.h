// One sequence of a request as the scheduler and engine see it: its tokens
// (prompt, then generated), how many of them are in the KV cache, and its
// blocks. A request with n > 1 samples has n sequences.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kvcache/block_table.h"

namespace pagellm {

enum class SeqStatus { kWaiting, kRunning, kFinished };

struct Sequence {
  Sequence(uint64_t id, std::vector<int32_t> prompt, int64_t max_total, int32_t block_size)
      : id(id),
        tokens(std::move(prompt)),
        n_prompt(static_cast<int64_t>(tokens.size())),
        max_total(max_total),
        blocks(block_size) {}

  uint64_t id;
  std::vector<int32_t> tokens;  // prompt followed by generated tokens
  int64_t n_prompt;
  int64_t max_total;            // stop (length) when tokens reach this count
  int64_t n_computed = 0;       // tokens whose K/V is in the cache
  int64_t n_cached_prompt = 0;  // prompt tokens served by the prefix cache (last admission)
  SeqStatus status = SeqStatus::kWaiting;
  BlockTable blocks;
  uint64_t admitted_order = 0;  // when it last became running (preemption picks the latest)
  int32_t preemptions = 0;
  // Models with recurrent layers: the sequence's slot in the state pools
  // while it runs (-1: none; a preempted sequence starts again from zeros).
  int32_t state_slot = -1;
  // Samples still to fork from this sequence when its prompt ends (n - 1;
  // then 0). Counted at admission where each sample needs a state slot.
  int32_t forks = 0;
  // Their prefix cache: one more position (besides the multiples of the
  // checkpoint interval) where the prompt's state is saved, the aligned end
  // of a prefix that other prompts share (0: none; set by the Scheduler).
  int64_t checkpoint_at = 0;
  // Speculative decoding: tokens proposed to follow `tokens`, set by the
  // engine before a step; the scheduler grants some (ScheduledSeq::n_draft).
  std::vector<int32_t> draft;
  // An embedding: only its prompt runs, every position from scratch (no
  // prefix-cache match), and nothing is generated.
  bool embedding = false;

  int64_t n_generated() const { return static_cast<int64_t>(tokens.size()) - n_prompt; }
  // Tokens that still need a forward pass before the next sample.
  int64_t n_pending() const { return static_cast<int64_t>(tokens.size()) - n_computed; }
};

}  // namespace pagellm
