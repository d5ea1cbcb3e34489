// Models with IQ4_NL / IQ4_XS matrices against the same model with every
// matrix expanded to F32 (by dequantize_row, checked on hand-built blocks in
// tests/tensor): the quantized kernels see Q8 activations, the F32 ones the
// floats, so the logits agree to activation rounding, not bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "kvcache/block_allocator.h"
#include "kvcache/block_table.h"
#include "model/llama_model.h"
#include "model/make_model.h"
#include "support/test_support.h"
#include "tensor/convert.h"

namespace pagellm {
namespace {

std::vector<float> prompt_logits(LlamaModel& model, ThreadPool& pool) {
  const int32_t bs = 16;
  const std::vector<int32_t> prompt = {1, 17, 255, 3, 400, 88, 9, 120, 33, 500, 2, 64};
  BlockAllocator alloc(2);
  KvCacheStorage kv(model.kv_shape(alloc.num_blocks(), bs, DType::F32),
                    {{"host", 0, model.hparams().n_layer}});
  BlockTable table(bs);
  EXPECT_TRUE(table.reserve(alloc, static_cast<int64_t>(prompt.size())));
  Batch b;
  const int32_t s = b.add_sequence(table);
  for (size_t i = 0; i < prompt.size(); ++i)
    b.add_token(s, prompt[i], static_cast<int32_t>(i), true);
  std::vector<float> logits;
  model.forward(b, kv, pool, logits);
  table.release(alloc);
  return logits;
}

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
      auto q = LlamaModel::load(quant.path, {.repack = repack});
      auto f = LlamaModel::load(expanded.path, {.repack = repack});
      const auto a = prompt_logits(*q, pool), b = prompt_logits(*f, pool);
      ASSERT_EQ(a.size(), b.size());
      double max_diff = 0, max_mag = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        max_diff = std::max(max_diff, static_cast<double>(std::fabs(a[i] - b[i])));
        max_mag = std::max(max_mag, static_cast<double>(std::fabs(b[i])));
      }
      EXPECT_GT(max_mag, 0.0);
      EXPECT_LT(max_diff, 0.03 * max_mag + 1e-3) << "max |logit| " << max_mag;
    }
  }
}

}  // namespace
}  // namespace pagellm
