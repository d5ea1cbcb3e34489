#include "backend/cuda/step_upload.h"

#include <algorithm>
#include <cstring>

namespace pagellm::cuda {

namespace {

size_t align16(size_t n) {
  return (n + 15) / 16 * 16;
}

}  // namespace

StepUploadLayout pack_step_inputs(const StepInputs& in, std::vector<uint8_t>& buf,
                                  int32_t stride_multiple) {
  StepUploadLayout l;
  for (int32_t s = 0; s < in.n_seqs; ++s)
    l.table_stride = std::max(l.table_stride, in.block_counts[s]);
  const int32_t m = std::max(stride_multiple, 1);
  l.table_stride = (l.table_stride + m - 1) / m * m;
  const size_t T = static_cast<size_t>(std::max(in.n_tokens, 0));
  l.off_seq = align16(T * 4);
  l.off_slots = l.off_seq + align16(T * 4);
  l.off_tables = l.off_slots + align16(T * 8);
  l.total = l.off_tables + static_cast<size_t>(std::max(in.n_seqs, 0)) * l.table_stride * 4;
  buf.assign(l.total, 0);
  if (T > 0) {
    std::memcpy(buf.data(), in.positions, T * 4);
    std::memcpy(buf.data() + l.off_seq, in.token_seq, T * 4);
    std::memcpy(buf.data() + l.off_slots, in.slots, T * 8);
  }
  for (int32_t s = 0; s < in.n_seqs; ++s)
    if (in.block_counts[s] > 0)
      std::memcpy(buf.data() + l.off_tables + static_cast<size_t>(s) * l.table_stride * 4,
                  in.block_tables[s], static_cast<size_t>(in.block_counts[s]) * 4);
  return l;
}

}  // namespace pagellm::cuda
