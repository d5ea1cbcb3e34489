// A step's batch (backend/backend.h StepInputs) packed into one host buffer
// for a single upload to the device:
//   positions  [n_tokens] int32        at 0
//   token_seq  [n_tokens] int32        at off_seq
//   slots      [n_tokens] int64        at off_slots
//   tables     [n_seqs][table_stride]  int32 at off_tables: sequence s's block
//              ids, then zeros up to table_stride: max(1, longest table of
//              any KV group) rounded up to a multiple of stride_multiple
//   then, for each further KV group g (StepInputs::more_groups), its slots
//   and tables at group_slots[g - 1] and group_tables[g - 1]
//   then, when the step has recurrent layers (StepInputs::recurrent), its
//   token_begin [n_seqs + 1] and state_slot [n_seqs] (int32) at
//   off_token_begin and off_state_slot (both 0 without)
// Every offset is a multiple of 16 bytes. Host code only: testable without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace pagellm::cuda {

struct StepUploadLayout {
  size_t off_seq = 0;
  size_t off_slots = 0;
  size_t off_tables = 0;
  size_t total = 0;
  int32_t table_stride = 1;
  std::vector<size_t> group_slots;   // KV groups 1..
  std::vector<size_t> group_tables;
  size_t off_token_begin = 0;
  size_t off_state_slot = 0;
};

// Fills `buf` (resized to layout.total) and returns the layout.
StepUploadLayout pack_step_inputs(const StepInputs& in, std::vector<uint8_t>& buf,
                                  int32_t stride_multiple = 1);

}  // namespace pagellm::cuda
