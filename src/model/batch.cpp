#include "model/batch.h"

#include <fmt/format.h>

#include "util/error.h"

namespace pagellm {

int32_t Batch::add_sequence(const BlockTable& table) {
  block_tables.push_back(&table);
  return n_seqs() - 1;
}

void Batch::add_token(int32_t seq, int32_t id, int32_t pos, bool want_logits) {
  const BlockTable& table = *block_tables.at(static_cast<size_t>(seq));
  if (pos < 0 || pos >= table.capacity_tokens())
    throw Error(fmt::format("position {} is outside the {} tokens reserved for sequence {}", pos,
                            table.capacity_tokens(), seq));
  if (want_logits) logit_tokens.push_back(n_tokens());
  tokens.push_back(id);
  positions.push_back(pos);
  token_seq.push_back(seq);
  slots.push_back(table.slot(pos));
}

void Batch::clear() {
  tokens.clear();
  positions.clear();
  token_seq.clear();
  slots.clear();
  logit_tokens.clear();
  block_tables.clear();
}

}  // namespace pagellm
