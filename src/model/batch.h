// One engine step's work, flattened: the tokens of any number of sequences,
// each with its position and the cache slot its K/V goes to, plus the block
// table of every sequence. Built by the scheduler, consumed by Model::forward.
#pragma once

#include <cstdint>
#include <vector>

#include "kvcache/block_table.h"
#include "kvcache/kv_cache_manager.h"

namespace pagellm {

struct Batch {
  std::vector<int32_t> tokens;                  // [n_tokens]
  std::vector<int32_t> positions;               // [n_tokens]
  std::vector<int32_t> token_seq;               // [n_tokens] index into block_tables
  std::vector<int64_t> slots;                   // [n_tokens] where each token's K/V is written
  std::vector<int32_t> logit_tokens;            // tokens whose logits are wanted, in output order
  // Tokens whose final-normed hidden states are wanted (embeddings), in output order.
  std::vector<int32_t> hidden_tokens;
  std::vector<const BlockTable*> block_tables;  // [n_seqs]
  // KV groups 1.. (kvcache/kv_group.h): [group - 1][n_tokens] slots there.
  std::vector<std::vector<int64_t>> more_slots;
  // Copy-on-write copies the step needs first. The engine applies them to its
  // own pools; a PipelineLink carries them to the other stages' pools.
  std::vector<BlockCopy> copies;
  // Models with recurrent layers (ModelHParams::has_recurrent): per sequence,
  // its state slot and the position from which its tokens are decoded one by
  // one (the end of its prompt: those positions always take the one-token
  // step, so a recomputed sequence gets the same bits as when it decoded);
  // and the slots to zero (a new sequence) or copy (a sequence restored from
  // a prefix-cache checkpoint) first.
  std::vector<int32_t> state_slots;  // [n_seqs]
  std::vector<int32_t> step_from;    // [n_seqs]
  std::vector<int32_t> state_resets;
  std::vector<std::pair<int32_t, int32_t>> state_copies;  // (src, dst)
  // Copies of states the previous steps left (src, dst): prefix-cache
  // checkpoints (kvcache/state_checkpoints.h) and forked samples' copies of
  // their parent's. Applied before anything else: a source slot freed since
  // may be zeroed or restored in this step. Restoring a checkpoint into a
  // sequence's slot is a state_copies entry.
  std::vector<std::pair<int32_t, int32_t>> state_saves;

  int32_t n_tokens() const { return static_cast<int32_t>(tokens.size()); }
  int32_t n_seqs() const { return static_cast<int32_t>(block_tables.size()); }
  int32_t n_groups() const { return 1 + static_cast<int32_t>(more_slots.size()); }

  // Adds a sequence; returns its index in this batch. The table must already
  // have room for every token added to it (BlockTable::reserve).
  int32_t add_sequence(const BlockTable& table);
  // Adds token `id` at position `pos` of sequence `seq`.
  void add_token(int32_t seq, int32_t id, int32_t pos, bool want_logits, bool want_hidden = false);
  void clear();
};

}  // namespace pagellm
