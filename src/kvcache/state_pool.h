// The recurrent state of one device's gated delta-net layers (Qwen3.5's
// linear-attention layers): a fixed number of slots, one per running
// sequence, each holding every such layer's short-conv inputs and delta-rule
// state. Unlike K/V it does not grow with the sequence; a sequence takes a
// slot when it starts, zeroed, and gives it back when it ends.
//
// Layout, per layer: conv states [n_slots][conv_floats], then delta states
// [n_slots][delta_floats], f32 (backend/recurrent_args.h's slot layouts).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace pagellm {

struct StatePoolShape {
  int32_t n_slots = 0;
  std::vector<int32_t> layers;  // the device's recurrent layers, ascending
  int64_t conv_floats = 0;      // per slot and layer
  int64_t delta_floats = 0;

  size_t slot_bytes() const;  // one sequence, every layer
  size_t total_bytes() const { return slot_bytes() * static_cast<size_t>(n_slots); }
};

class StatePool {
 public:
  // Allocates and zeroes in `backend`'s memory (host RAM when null).
  explicit StatePool(StatePoolShape shape, Backend* backend = nullptr);
  ~StatePool();
  StatePool(const StatePool&) = delete;
  StatePool& operator=(const StatePool&) = delete;

  const StatePoolShape& shape() const { return shape_; }
  bool has_layer(int32_t layer) const { return index_of(layer) >= 0; }
  float* conv(int32_t layer);   // slot s at + s * conv_floats
  float* delta(int32_t layer);  // slot s at + s * delta_floats
  // A new sequence's slot starts from zeros.
  void clear_slot(int32_t slot);
  // `dst` takes `src`'s state (a forked sample continues from the prompt's).
  void copy_slot(int32_t src, int32_t dst);
  size_t bytes() const { return bytes_; }

 private:
  int32_t index_of(int32_t layer) const;
  float* layer_base(int32_t layer);
  void check_slot(int32_t slot) const;

  StatePoolShape shape_;
  Backend* backend_;
  float* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace pagellm
