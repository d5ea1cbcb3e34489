// Models with IQ4_NL / IQ4_XS matrices against the same model with every
// matrix expanded to F32 (by dequantize_row, checked on hand-built blocks in
// tests/tensor): the quantized kernels see Q8 activations, the F32 ones the
// floats, so the logits agree to activation rounding, not bit for bit.
#include <gtest/gtest.h>

#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "model/runner.h"
#include "model/make_model.h"
#include "model/model_test_util.h"
#include "support/test_support.h"
#include "tensor/convert.h"

namespace pagellm {
namespace {

// A copy of the GGUF file at `src` with every quantized tensor expanded to F32.
void write_expanded(const std::string& src, const std::string& dst) {
  auto f = GgufFile::open(src);
  GgufWriter w;
  for (const auto& kv : f->metadata()) w.set(kv.key, kv.value);
  for (const auto& t : f->tensors()) {
    const int64_t n_in = t.ne[0];
    int64_t rows = 1;
    for (size_t i = 1; i < t.ne.size(); ++i) rows *= t.ne[i];
    const size_t in_bytes = dtype_row_bytes(t.type, n_in);
    std::vector<uint8_t> out(static_cast<size_t>(n_in * rows) * sizeof(float));
    for (int64_t r = 0; r < rows; ++r)
      dequantize_row(t.type, t.data + static_cast<size_t>(r) * in_bytes,
                     reinterpret_cast<float*>(out.data()) + r * n_in, n_in);
    w.add_tensor(t.name, DType::F32, t.ne, std::move(out));
  }
  w.write_file(dst);
}

TEST(Iq4Model, LogitsMatchTheExpandedModel) {
  ThreadPool pool(2);
  for (DType t : {DType::IQ4_NL, DType::IQ4_XS}) {
    for (bool repack : {true, false}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + (repack ? " repack" : " file layout"));
      test::TempPath quant(".gguf"), expanded(".gguf");
      MakeModelSpec spec;
      spec.n_layer = 2;
      spec.n_embd = 256;  // IQ4_XS rows are whole 256-element super-blocks
      spec.n_ff = 512;
      spec.type = t;
      spec.vocab_from = test::data_path("golden/random/rand-llama-tok512-F32.gguf");
      make_model(spec, quant.path, pool);
      write_expanded(quant.path, expanded.path);
      auto q = ModelRunner::load(quant.path, {.repack = repack});
      auto f = ModelRunner::load(expanded.path, {.repack = repack});
      test::expect_logits_close(test::prompt_logits(*q, pool), test::prompt_logits(*f, pool), 0.03);
    }
  }
}

}  // namespace
}  // namespace pagellm
