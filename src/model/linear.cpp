#include "model/linear.h"

#include <vector>

#include "tensor/convert.h"

namespace pagellm {

struct Linear::Scratch {};

Linear::Linear() : scratch_(std::make_unique<Scratch>()) {}
Linear::~Linear() = default;

void Linear::operator()(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y,
                        ThreadPool& pool) {
  pool.parallel_for(
      w.n_out,
      [&](int64_t b, int64_t e, int) {
        std::vector<float> row(static_cast<size_t>(w.n_in));
        for (int64_t r = b; r < e; ++r) {
          dequantize_row(w.type, w.row(r), row.data(), w.n_in);
          for (int64_t t = 0; t < n_tokens; ++t) {
            const float* xt = x + t * w.n_in;
            float acc = 0;
            for (int64_t i = 0; i < w.n_in; ++i) acc += row[static_cast<size_t>(i)] * xt[i];
            y[t * w.n_out + r] = acc;
          }
        }
      },
      16);
}

}  // namespace pagellm
