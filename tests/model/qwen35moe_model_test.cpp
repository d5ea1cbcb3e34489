// qwen35moe by composition (no llama.cpp reference file exists for it): a
// one-expert model whose shared expert is silenced (its down rows zero) is the
// dense qwen35 model whose FFN is the routed expert; one whose routed expert is
// silenced and whose shared gate row is zero (sigmoid(0) = 1/2) is the dense
// model whose FFN is the shared expert with its down rows halved (exact in
// F32). Both twins are rewritten from one make-model file, so the attention
// and delta-net weights are the same bits. Also: make-model's hybrid files
// (keys, layer kinds, ssm_a < 0, norms near 1).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "model/golden_util.h"
#include "model/make_model.h"
#include "model/runner.h"
#include "support/test_support.h"

namespace pagellm {
namespace {

enum class Keep { kRouted, kShared };

bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

std::string erase(std::string s, const char* part) {
  if (const size_t at = s.find(part); at != std::string::npos) s.erase(at, std::strlen(part));
  return s;
}

// A copy of tensor t, zeroed (`zero`) or scaled by `scale` (F32 only).
GgufWriter::FillFn copy_of(const GgufTensorInfo& t, bool zero, float scale = 1.0f) {
  return [&t, zero, scale](uint8_t* dst, size_t n) {
    if (zero) {
      std::fill(dst, dst + n, uint8_t{0});
      return;
    }
    std::copy(t.data, t.data + n, dst);
    if (scale != 1.0f) {
      ASSERT_EQ(t.type, DType::F32) << t.name;
      float* x = reinterpret_cast<float*>(dst);
      for (size_t i = 0; i < n / sizeof(float); ++i) x[i] *= scale;
    }
  };
}

// From a one-expert qwen35moe file: the MoE model with the other part silenced
// (moe_out) and its dense qwen35 twin (dense_out).
void write_twins(const GgufFile& src, Keep keep, const std::string& moe_out,
                 const std::string& dense_out) {
  GgufWriter m, d;
  for (const auto& kv : src.metadata()) {
    m.set(kv.key, kv.value);
    if (kv.key == "general.architecture")
      d.set(kv.key, GgufValue::str("qwen35"));
    else if (!has(kv.key, "expert"))
      d.set(kv.key.starts_with("qwen35moe.") ? "qwen35." + kv.key.substr(10) : kv.key, kv.value);
  }
  const bool routed = keep == Keep::kRouted;
  for (const auto& t : src.tensors()) {
    const bool exps = has(t.name, "_exps"), shexp = has(t.name, "shexp");
    const bool silenced = routed ? t.name.find("ffn_down_shexp") != std::string::npos
                                 : has(t.name, "ffn_down_exps") || has(t.name, "ffn_gate_inp_shexp");
    m.add_tensor(t.name, t.type, t.ne, copy_of(t, silenced));
    if (has(t.name, "ffn_gate_inp")) continue;  // routers: none in the dense model
    if ((exps && !routed) || (shexp && routed)) continue;
    std::vector<int64_t> ne = t.ne;
    ne.resize(std::min<size_t>(ne.size(), 2));
    const bool halve = !routed && has(t.name, "ffn_down_shexp");
    d.add_tensor(erase(erase(t.name, "_exps"), "_shexp"), t.type, ne,
                 copy_of(t, false, halve ? 0.5f : 1.0f));
  }
  m.write_file(moe_out);
  d.write_file(dense_out);
}

MakeModelSpec small_hybrid(const std::string& arch, DType type) {
  MakeModelSpec s;
  s.arch = arch;
  s.n_embd = 128;
  s.n_layer = 4;  // layers 0-2 gated delta-net, 3 full attention
  s.n_head = 4;
  s.n_head_kv = 2;
  s.n_ff = 128;
  s.type = type;
  s.vocab_from = test::data_path("stories260K.gguf");
  return s;
}

// Prompt of 100 ids: the delta rule's chunked path (64) and its tail.
std::vector<int32_t> long_prompt() {
  std::vector<int32_t> p = {1};
  for (int i = 1; i < 100; ++i) p.push_back((i * 37 + 11) % 500 + 3);
  return p;
}

TEST(Qwen35MoeModel, OneExpertPartsAreTheirDenseTwins) {
  ThreadPool pool(2);
  for (DType type : {DType::F32, DType::Q8_0}) {
    MakeModelSpec spec = small_hybrid("qwen35moe", type);
    spec.n_expert = 1;
    spec.n_expert_used = 1;
    test::TempPath src(".gguf");
    make_model(spec, src.path, pool);
    auto file = GgufFile::open(src.path);
    for (Keep keep : {Keep::kRouted, Keep::kShared}) {
      if (keep == Keep::kShared && type != DType::F32) continue;  // halving is exact in F32 only
      SCOPED_TRACE(fmt::format("{} {}", dtype_name(type), keep == Keep::kRouted ? "routed" : "shared"));
      test::TempPath moe(".gguf"), dense(".gguf");
      write_twins(*file, keep, moe.path, dense.path);
      auto m = ModelRunner::load(moe.path);
      auto d = ModelRunner::load(dense.path);
      ASSERT_EQ(m->hparams().arch, "qwen35moe");
      ASSERT_EQ(d->hparams().arch, "qwen35");
      ASSERT_GT(m->hparams().n_ff_shexp, 0);
      ASSERT_FALSE(d->hparams().moe());
      auto a = golden::run_greedy(*m, long_prompt(), 6, DType::F32, pool);
      auto b = golden::run_greedy(*d, long_prompt(), 6, DType::F32, pool);
      double diff = 0, mag = 0;
      for (size_t i = 0; i < b.last_logits.size(); ++i) {
        diff = std::max(diff, static_cast<double>(std::fabs(a.last_logits[i] - b.last_logits[i])));
        mag = std::max(mag, static_cast<double>(std::fabs(b.last_logits[i])));
      }
      EXPECT_GT(mag, 0.1);
      EXPECT_LT(diff, 1e-5 * mag + 1e-6) << "max |logit| " << mag;
      EXPECT_EQ(a.ids, b.ids);
    }
  }
}

// Silencing the shared expert changes the logits (it is not a no-op), and so
// does routing to a second expert: both parts take part.
TEST(Qwen35MoeModel, SharedAndRoutedExpertsBothCount) {
  ThreadPool pool(2);
  MakeModelSpec spec = small_hybrid("qwen35moe", DType::F32);
  spec.n_expert = 1;
  spec.n_expert_used = 1;
  test::TempPath src(".gguf"), moe(".gguf"), dense(".gguf");
  make_model(spec, src.path, pool);
  write_twins(*GgufFile::open(src.path), Keep::kRouted, moe.path, dense.path);
  auto full = ModelRunner::load(src.path);
  auto silenced = ModelRunner::load(moe.path);
  auto a = golden::run_greedy(*full, long_prompt(), 1, DType::F32, pool).last_logits;
  auto b = golden::run_greedy(*silenced, long_prompt(), 1, DType::F32, pool).last_logits;
  double diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff = std::max(diff, static_cast<double>(std::fabs(a[i] - b[i])));
  EXPECT_GT(diff, 1e-3);
}

TEST(MakeModel, HybridFilesAreTheFamilysOwn) {
  ThreadPool pool(2);
  for (const char* arch : {"qwen35", "qwen35moe"}) {
    SCOPED_TRACE(arch);
    MakeModelSpec spec = small_hybrid(arch, DType::Q8_0);
    spec.n_layer = 6;
    spec.full_attention_interval = 3;
    test::TempPath path(".gguf");
    make_model(spec, path.path, pool);
    auto m = ModelRunner::load(path.path);
    const ModelHParams& hp = m->hparams();
    for (int32_t l = 0; l < hp.n_layer; ++l)
      EXPECT_EQ(hp.layers[static_cast<size_t>(l)].recurrent, (l + 1) % 3 != 0) << l;
    EXPECT_EQ(hp.delta_net.conv_kernel, 4);
    EXPECT_EQ(hp.delta_net.d_k, 32);
    EXPECT_EQ(hp.delta_net.d_v, 32);
    EXPECT_EQ(hp.delta_net.n_k_heads, 2);
    EXPECT_EQ(hp.delta_net.n_v_heads, 4);
    EXPECT_EQ(hp.n_rot, hp.head_dim / 4);  // partial rotary, as Qwen3.5
    EXPECT_TRUE(hp.attn_output_gate);
    auto f = GgufFile::open(path.path);
    int ssm_a = 0, norms = 0;
    for (const auto& t : f->tensors()) {
      if (t.type != DType::F32 || t.ne.size() != 1) continue;
      const float* x = reinterpret_cast<const float*>(t.data);
      for (int64_t i = 0; i < t.ne[0]; ++i) {
        if (t.name.ends_with(".ssm_a")) {
          EXPECT_LT(x[i], 0.0f) << t.name;  // -exp(A_log): the state decays
          ++ssm_a;
        } else if (has(t.name, "norm")) {
          EXPECT_NEAR(x[i], 1.0f, 0.2f) << t.name;
          ++norms;
        }
      }
    }
    EXPECT_EQ(ssm_a, 4 * 4);  // 4 recurrent layers of 4 v heads
    EXPECT_GT(norms, 0);
  }
}

}  // namespace
}  // namespace pagellm
