#include "model/batch.h"

#include <fmt/format.h>

#include "util/error.h"

namespace pagellm {

int32_t Batch::add_sequence(const BlockTable& table) {
  if (block_tables.empty())
    more_slots.assign(static_cast<size_t>(table.n_groups() - 1), {});
  else if (table.n_groups() != n_groups())
    throw Error(fmt::format("a batch mixes block tables of {} and {} KV groups", n_groups(),
                            table.n_groups()));
  block_tables.push_back(&table);
  return n_seqs() - 1;
}

void Batch::add_token(int32_t seq, int32_t id, int32_t pos, bool want_logits, bool want_hidden) {
  const BlockTable& table = *block_tables.at(static_cast<size_t>(seq));
  if (pos < 0 || pos >= table.capacity_tokens())
    throw Error(fmt::format("position {} is outside the {} tokens reserved for sequence {}", pos,
                            table.capacity_tokens(), seq));
  if (want_logits) logit_tokens.push_back(n_tokens());
  if (want_hidden) hidden_tokens.push_back(n_tokens());
  tokens.push_back(id);
  positions.push_back(pos);
  token_seq.push_back(seq);
  slots.push_back(table.slot(pos));
  for (int32_t g = 1; g < table.n_groups(); ++g) {
    const auto& blocks = table.blocks(g);
    const size_t b = static_cast<size_t>(pos / table.block_size());
    if (b >= blocks.size() || blocks[b] == BlockTable::kNoBlock)
      throw Error(fmt::format("position {} of sequence {} has no block in KV group {}", pos, seq, g));
    more_slots[static_cast<size_t>(g - 1)].push_back(table.slot(g, pos));
  }
}

void Batch::clear() {
  tokens.clear();
  positions.clear();
  token_seq.clear();
  slots.clear();
  more_slots.clear();
  logit_tokens.clear();
  hidden_tokens.clear();
  block_tables.clear();
  copies.clear();
  state_slots.clear();
  step_from.clear();
  state_resets.clear();
  state_copies.clear();
  state_saves.clear();
}

}  // namespace pagellm
