#include "model/linear.h"

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

}  // namespace pagellm
