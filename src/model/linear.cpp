#include "model/linear.h"

#include <cstring>
#include <vector>

#include "backend/cpu/activation_quant.h"

namespace pagellm {

void Linear::operator()(const float* x, int64_t n_tokens, std::initializer_list<Output> outputs,
                        ThreadPool& pool) {
  std::vector<std::pair<Format, cpu::ActivationRows>> prepared;
  for (const Output& o : outputs) {
    const cpu::WeightMatrix cw = o.w->cpu();
    const Format f{cpu::dot_type(cw.type), cw.layout};
    const cpu::ActivationRows* act = nullptr;
    for (const auto& p : prepared)
      if (p.first == f) act = &p.second;
    if (!act) {
      prepared.emplace_back(f,
                            cpu::quantize_activations(cw, x, cw.n_in, n_tokens, pool, scratch_[f]));
      act = &prepared.back().second;
    }
    cpu::matmul(cw, *act, o.y, cw.n_out, pool);
  }
}

void Linear::reserve(const WeightMatrix& w, int64_t rows) {
  const cpu::WeightMatrix cw = w.cpu();
  const Format f{cpu::dot_type(cw.type), cw.layout};
  if (f.first == DType::F32) return;  // float activations are used in place
  const size_t bytes = cpu::activation_stride(cw) * static_cast<size_t>(rows);
  auto& scratch = scratch_[f];
  if (scratch.capacity() >= bytes) return;
  std::memset(scratch.reserve(bytes), 0, bytes);
}

}  // namespace pagellm
