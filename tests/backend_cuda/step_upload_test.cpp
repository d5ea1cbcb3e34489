// The step's batch as the CUDA backend uploads it (host code, runs without a
// GPU): every array where its offset says, 16-byte aligned, block tables
// padded with zeros to the longest.
#include "backend/cuda/step_upload.h"

#include <gtest/gtest.h>

#include <cstring>

#include "util/error.h"

namespace pagellm::cuda {
namespace {

template <typename T>
T at(const std::vector<uint8_t>& buf, size_t off, size_t i) {
  T v;
  std::memcpy(&v, buf.data() + off + i * sizeof(T), sizeof(T));
  return v;
}

TEST(CudaStepUpload, PacksEveryArrayAtItsOffset) {
  const std::vector<int32_t> pos = {0, 1, 2, 7, 3}, seq = {0, 0, 0, 1, 2};
  const std::vector<int64_t> slots = {16, 17, 18, 39, 1000000000003};
  const std::vector<int32_t> t0 = {1}, t1 = {5, 2}, t2 = {9, 8, 7};
  const int32_t* tables[] = {t0.data(), t1.data(), t2.data()};
  const int32_t counts[] = {1, 2, 3};
  StepInputs in;
  in.n_tokens = 5;
  in.n_seqs = 3;
  in.positions = pos.data();
  in.token_seq = seq.data();
  in.slots = slots.data();
  in.block_tables = tables;
  in.block_counts = counts;
  std::vector<uint8_t> buf;
  const StepUploadLayout l = pack_step_inputs(in, buf);
  ASSERT_EQ(buf.size(), l.total);
  for (size_t off : {l.off_seq, l.off_slots, l.off_tables}) EXPECT_EQ(off % 16, 0u);
  EXPECT_GE(l.off_seq, 5 * 4u);
  EXPECT_GE(l.off_slots, l.off_seq + 5 * 4);
  EXPECT_GE(l.off_tables, l.off_slots + 5 * 8);
  EXPECT_EQ(l.table_stride, 3);
  EXPECT_EQ(l.total, l.off_tables + 3 * 3 * 4);
  for (size_t t = 0; t < 5; ++t) {
    EXPECT_EQ(at<int32_t>(buf, 0, t), pos[t]);
    EXPECT_EQ(at<int32_t>(buf, l.off_seq, t), seq[t]);
    EXPECT_EQ(at<int64_t>(buf, l.off_slots, t), slots[t]);
  }
  const int32_t want[3][3] = {{1, 0, 0}, {5, 2, 0}, {9, 8, 7}};
  for (size_t s = 0; s < 3; ++s)
    for (size_t b = 0; b < 3; ++b) EXPECT_EQ(at<int32_t>(buf, l.off_tables, s * 3 + b), want[s][b]);

  // Tables widened to a multiple of 32 entries (stable shapes for recorded
  // steps): the same ids, zeros after them.
  std::vector<uint8_t> wide;
  const StepUploadLayout w = pack_step_inputs(in, wide, 32);
  EXPECT_EQ(w.table_stride, 32);
  EXPECT_EQ(w.total, w.off_tables + 3 * 32 * 4);
  for (size_t s = 0; s < 3; ++s)
    for (size_t b = 0; b < 32; ++b)
      EXPECT_EQ(at<int32_t>(wide, w.off_tables, s * 32 + b), b < 3 ? want[s][b] : 0);
}

TEST(CudaStepUpload, EmptyStepAndEmptyTables) {
  const int32_t counts[] = {0};
  const int32_t* tables[] = {nullptr};
  StepInputs in;
  in.n_seqs = 1;
  in.block_tables = tables;
  in.block_counts = counts;
  std::vector<uint8_t> buf;
  const StepUploadLayout l = pack_step_inputs(in, buf);
  EXPECT_EQ(l.table_stride, 1);  // never zero: the kernels index with it
  EXPECT_EQ(l.total, 4u);
  EXPECT_EQ(at<int32_t>(buf, l.off_tables, 0), 0);
}

// A second KV group (a sliding window's tables, with holes): its slots and
// tables after group 0's, padded to the stride of the longest table of any
// group.
TEST(CudaStepUpload, PacksEveryKvGroup) {
  const std::vector<int32_t> pos = {40, 41}, seq = {0, 1};
  const std::vector<int64_t> slots0 = {40, 73}, slots1 = {8, 9};
  const std::vector<int32_t> a0 = {0, 1, 2}, b0 = {3, 4, 5, 6}, a1 = {-1, -1, 0}, b1 = {1};
  const int32_t* t0[] = {a0.data(), b0.data()};
  const int32_t* t1[] = {a1.data(), b1.data()};
  const int32_t c0[] = {3, 4}, c1[] = {3, 1};
  StepInputs::Group g1{slots1.data(), t1, c1};
  StepInputs in;
  in.n_tokens = 2;
  in.n_seqs = 2;
  in.positions = pos.data();
  in.token_seq = seq.data();
  in.slots = slots0.data();
  in.block_tables = t0;
  in.block_counts = c0;
  in.more_groups = {&g1, 1};
  std::vector<uint8_t> buf;
  const StepUploadLayout l = pack_step_inputs(in, buf);
  ASSERT_EQ(l.group_slots.size(), 1u);
  ASSERT_EQ(buf.size(), l.total);
  EXPECT_EQ(l.table_stride, 4);
  EXPECT_EQ(l.group_slots[0] % 16, 0u);
  EXPECT_EQ(l.group_tables[0] % 16, 0u);
  EXPECT_GE(l.group_slots[0], l.off_tables + 2 * 4 * 4);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(at<int64_t>(buf, l.off_slots, i), slots0[i]);
    EXPECT_EQ(at<int64_t>(buf, l.group_slots[0], i), slots1[i]);
  }
  EXPECT_EQ(at<int32_t>(buf, l.group_tables[0], 0), -1);
  EXPECT_EQ(at<int32_t>(buf, l.group_tables[0], 2), 0);
  EXPECT_EQ(at<int32_t>(buf, l.group_tables[0], 3), 0);  // padding
  EXPECT_EQ(at<int32_t>(buf, l.group_tables[0], 4), 1);  // sequence 1's row
  EXPECT_EQ(at<int32_t>(buf, l.off_tables, 7), 6);
}

// A step with recurrent layers: its sequences' row ranges and state slots
// after everything else (the device kernels read them there); a recurrent
// batch of another sequence count is refused.
TEST(CudaStepUpload, PacksTheRecurrentBatch) {
  const std::vector<int32_t> pos = {4, 5, 9}, seq = {0, 0, 1};
  const std::vector<int64_t> slots = {4, 5, 25};
  const std::vector<int32_t> t0 = {0}, t1 = {1};
  const int32_t* tables[] = {t0.data(), t1.data()};
  const int32_t counts[] = {1, 1};
  const std::vector<int32_t> begin = {0, 2, 3}, state = {6, 1}, first = {4, 9};
  RecurrentBatch rb;
  rb.n_seqs = 2;
  rb.token_begin = begin.data();
  rb.state_slot = state.data();
  rb.first_pos = first.data();
  StepInputs in;
  in.n_tokens = 3;
  in.n_seqs = 2;
  in.positions = pos.data();
  in.token_seq = seq.data();
  in.slots = slots.data();
  in.block_tables = tables;
  in.block_counts = counts;
  std::vector<uint8_t> plain;
  const StepUploadLayout p = pack_step_inputs(in, plain);
  EXPECT_EQ(p.off_token_begin, 0u);
  in.recurrent = &rb;
  std::vector<uint8_t> buf;
  const StepUploadLayout l = pack_step_inputs(in, buf);
  ASSERT_EQ(buf.size(), l.total);
  EXPECT_EQ(l.off_token_begin % 16, 0u);
  EXPECT_EQ(l.off_state_slot % 16, 0u);
  EXPECT_GE(l.off_token_begin, p.total);  // after the other arrays, which keep their places
  EXPECT_EQ(l.off_tables, p.off_tables);
  EXPECT_GE(l.off_state_slot, l.off_token_begin + 3 * 4);
  EXPECT_GE(l.total, l.off_state_slot + 2 * 4);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(at<int32_t>(buf, l.off_token_begin, i), begin[i]);
  for (size_t i = 0; i < 2; ++i) EXPECT_EQ(at<int32_t>(buf, l.off_state_slot, i), state[i]);
  EXPECT_EQ(0, std::memcmp(buf.data(), plain.data(), p.total));

  rb.n_seqs = 1;
  EXPECT_THROW(pack_step_inputs(in, buf), Error);
}

}  // namespace
}  // namespace pagellm::cuda
