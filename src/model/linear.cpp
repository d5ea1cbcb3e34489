#include "model/linear.h"
#include <cstring>

#include <vector>

#include "backend/cpu/activation_quant.h"

namespace pagellm {

void Linear::operator()(const float* x, int64_t n_tokens, std::initializer_list<Output> outputs,
                        ThreadPool& pool) {
  std::vector<std::pair<DType, cpu::ActivationRows>> prepared;
  for (const Output& o : outputs) {
    const WeightMatrix& w = *o.w;
    const DType dt = cpu::dot_type(w.type);
    const cpu::ActivationRows* act = nullptr;
    for (const auto& p : prepared)
      if (p.first == dt) act = &p.second;
    if (!act) {
      prepared.emplace_back(
          dt, cpu::quantize_activations(w.type, x, w.n_in, n_tokens, w.n_in, pool, scratch_[dt]));
      act = &prepared.back().second;
    }
    cpu::WeightMatrix cw{w.type, w.n_in, w.n_out, w.data, w.row_bytes};
    cpu::matmul(cw, *act, o.y, w.n_out, pool);
  }
}

void Linear::reserve(DType type, int64_t n_in, int64_t rows) {
  const DType dt = cpu::dot_type(type);
  if (dt == DType::F32) return;  // float activations are used in place
  const size_t row = (cpu::activation_row_bytes(type, n_in) + 63) & ~size_t{63};
  const size_t bytes = row * static_cast<size_t>(rows);
  auto& scratch = scratch_[dt];
  if (scratch.capacity() >= bytes) return;
  std::memset(scratch.reserve(bytes), 0, bytes);
}

}  // namespace pagellm
