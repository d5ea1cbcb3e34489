// How RoPE pairs up the dimensions of a head: shared by every backend.
#pragma once

namespace pagellm {

enum class RopeStyle {
  kNorm,  // rotates adjacent pairs (x[2i], x[2i+1])  (llama)
  kNeox,  // rotates pairs (x[i], x[i + n_rot/2])      (qwen2, neox)
};

}  // namespace pagellm
