#include "model/per_layer_inputs.h"

#include <cmath>

#include "tensor/convert.h"

namespace pagellm {

void PerLayerInputs::init(const ModelHParams& hp, const ModelWeights& w) {
  E_ = hp.n_embd;
  P_ = hp.n_embd_per_layer;
  L_ = hp.n_layer;
  embd_scale_ = hp.embd_scale;
  eps_ = hp.rms_eps;
  token_embd_ = w.token_embd;
  table_ = w.extra.matrix(MatrixRole::kPerLayerTokenEmbd);
  norm_ = w.extra.vector(VectorRole::kPerLayerProjNorm);
  const WeightMatrix& proj = w.extra.matrix(MatrixRole::kPerLayerModelProj);
  proj_.resize(static_cast<size_t>(L_ * P_ * E_));
  for (int64_t r = 0; r < L_ * P_; ++r) dequantize_row(proj.type, proj.row(r), proj_.data() + r * E_, E_);
}

void PerLayerInputs::compute(const int32_t* tokens, int64_t T, int32_t layer_begin,
                             int32_t layer_end, ThreadPool& pool, std::vector<float>& out) const {
  const int64_t n = layer_end - layer_begin;
  out.resize(static_cast<size_t>(n * T * P_));
  const float proj_scale = 1.0f / std::sqrt(static_cast<float>(E_));
  const float table_scale = std::sqrt(static_cast<float>(P_));
  const float sum_scale = 1.0f / std::sqrt(2.0f);
  pool.parallel_for(T, [&](int64_t b, int64_t e, int) {
    std::vector<float> x(static_cast<size_t>(E_)), row(static_cast<size_t>(L_ * P_)),
        p(static_cast<size_t>(P_));
    for (int64_t t = b; t < e; ++t) {
      dequantize_row(token_embd_.type, token_embd_.row(tokens[t]), x.data(), E_);
      for (float& v : x) v *= embd_scale_;
      dequantize_row(table_.type, table_.row(tokens[t]), row.data(), L_ * P_);
      for (int64_t l = layer_begin; l < layer_end; ++l) {
        double ss = 0;
        for (int64_t j = 0; j < P_; ++j) {
          const float* w = proj_.data() + (l * P_ + j) * E_;
          double acc = 0;
          for (int64_t i = 0; i < E_; ++i) acc += static_cast<double>(w[i]) * x[static_cast<size_t>(i)];
          p[static_cast<size_t>(j)] = static_cast<float>(acc) * proj_scale;
          ss += static_cast<double>(p[static_cast<size_t>(j)]) * p[static_cast<size_t>(j)];
        }
        const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(P_) + eps_));
        float* o = out.data() + ((l - layer_begin) * T + t) * P_;
        for (int64_t j = 0; j < P_; ++j)
          o[j] = (p[static_cast<size_t>(j)] * inv * norm_[j] +
                  row[static_cast<size_t>(l * P_ + j)] * table_scale) *
                 sum_scale;
      }
    }
  });
}

}  // namespace pagellm
