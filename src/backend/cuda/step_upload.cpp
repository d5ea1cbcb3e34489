#include "backend/cuda/step_upload.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "util/error.h"

namespace pagellm::cuda {

namespace {

size_t align16(size_t n) {
  return (n + 15) / 16 * 16;
}

}  // namespace

StepUploadLayout pack_step_inputs(const StepInputs& in, std::vector<uint8_t>& buf,
                                  int32_t stride_multiple) {
  StepUploadLayout l;
  const int32_t G = 1 + static_cast<int32_t>(in.more_groups.size());
  for (int32_t g = 0; g < G; ++g)
    for (int32_t s = 0; s < in.n_seqs; ++s)
      l.table_stride = std::max(l.table_stride, in.group(g).block_counts[s]);
  const int32_t m = std::max(stride_multiple, 1);
  l.table_stride = (l.table_stride + m - 1) / m * m;
  const size_t T = static_cast<size_t>(std::max(in.n_tokens, 0));
  const size_t table_bytes = static_cast<size_t>(std::max(in.n_seqs, 0)) * l.table_stride * 4;
  l.off_seq = align16(T * 4);
  l.off_slots = l.off_seq + align16(T * 4);
  l.off_tables = l.off_slots + align16(T * 8);
  l.total = l.off_tables + table_bytes;
  for (int32_t g = 1; g < G; ++g) {
    l.total = align16(l.total);
    l.group_slots.push_back(l.total);
    l.group_tables.push_back(l.total + align16(T * 8));
    l.total += align16(T * 8) + table_bytes;
  }
  const RecurrentBatch* rb = in.recurrent;
  const size_t S = static_cast<size_t>(std::max(in.n_seqs, 0));
  if (rb) {
    if (rb->n_seqs != in.n_seqs)
      throw Error(fmt::format("the step's recurrent batch has {} sequences, the step {}",
                              rb->n_seqs, in.n_seqs));
    l.off_token_begin = align16(l.total);
    l.off_state_slot = l.off_token_begin + align16((S + 1) * 4);
    l.total = l.off_state_slot + S * 4;
  }
  buf.assign(l.total, 0);
  if (rb) {
    std::memcpy(buf.data() + l.off_token_begin, rb->token_begin, (S + 1) * 4);
    if (S > 0) std::memcpy(buf.data() + l.off_state_slot, rb->state_slot, S * 4);
  }
  if (T > 0) {
    std::memcpy(buf.data(), in.positions, T * 4);
    std::memcpy(buf.data() + l.off_seq, in.token_seq, T * 4);
  }
  for (int32_t g = 0; g < G; ++g) {
    const StepInputs::Group grp = in.group(g);
    const size_t slots = g == 0 ? l.off_slots : l.group_slots[static_cast<size_t>(g - 1)];
    const size_t tables = g == 0 ? l.off_tables : l.group_tables[static_cast<size_t>(g - 1)];
    if (T > 0) std::memcpy(buf.data() + slots, grp.slots, T * 8);
    for (int32_t s = 0; s < in.n_seqs; ++s)
      if (grp.block_counts[s] > 0)
        std::memcpy(buf.data() + tables + static_cast<size_t>(s) * l.table_stride * 4,
                    grp.block_tables[s], static_cast<size_t>(grp.block_counts[s]) * 4);
  }
  return l;
}

}  // namespace pagellm::cuda
