// Model footprints from GGUF metadata: per-layer weights, KV bytes per token,
// workspace.
#include "planner/model_footprint.h"

#include <gtest/gtest.h>

#include "backend/cuda/paged_attention.h"
#include "model/runner.h"
#include "model/make_model.h"
#include "support/test_support.h"
#include "util/error.h"

namespace pagellm {
namespace {

TEST(ModelFootprint, ShippedModel) {
  auto f = GgufFile::open(test::data_path("stories260K.gguf"));
  const ModelHParams hp = ModelHParams::from_gguf(*f);
  const ModelFootprint fp = model_footprint(*f, hp);
  ASSERT_EQ(fp.n_layer, 5);
  EXPECT_EQ(fp.n_ctx_train, 512);
  // q, k, v, o, 2 norms, gate, up, down (all f32).
  const uint64_t layer = 4 * (64 * 64 + 64 * 32 + 64 * 32 + 64 * 64 + 64 + 64 + 3 * 64 * 172);
  for (uint64_t b : fp.layer_weight_bytes) EXPECT_EQ(b, layer);
  EXPECT_EQ(fp.host_weight_bytes, 4u * 64 * 512);  // token embedding
  EXPECT_EQ(fp.output_weight_bytes, 4u * (64 + 64 * 512));
  EXPECT_EQ(fp.output_weight_bytes_on_host, fp.output_weight_bytes);  // not tied
  EXPECT_EQ(fp.total_weight_bytes(), f->tensor_data_bytes());
  EXPECT_EQ(fp.weight_bytes_by_type.at("f32"), f->tensor_data_bytes());
  // 4 KV heads of 8: K + V in f16.
  EXPECT_EQ(fp.kv_bytes_per_token_layer, 2u * 4 * 8 * 2);
  // Workspace for T = 2048 tokens, R = 64 rows of logits (the formula in the header).
  const uint64_t T = 2048, R = 64;
  EXPECT_EQ(fp.layer_workspace_bytes,
            4 * T * (5 * 64 + 2 * 32 + 2 * 172) + 2 * T * 1 * 320 + 4 * T * 8 + (1u << 20));
  EXPECT_EQ(fp.output_workspace_bytes, 4 * R * (512 + 64));
  EXPECT_EQ(fp.host_workspace_bytes, 4 * R * 512);

  FootprintOptions o;
  o.kv_type = DType::F32;
  o.max_batched_tokens = 512;
  o.max_num_seqs = 8;
  const ModelFootprint f32 = model_footprint(*f, hp, o);
  EXPECT_EQ(f32.kv_bytes_per_token_layer, 2u * 4 * 8 * 4);
  EXPECT_EQ(f32.output_workspace_bytes, 4u * 8 * (512 + 64));
  o.kv_type = DType::Q8_0;  // head size 8 is not a multiple of 32
  EXPECT_THROW(model_footprint(*f, hp, o), ConfigError);
}

TEST(ModelFootprint, KvBytesPerType) {
  EXPECT_EQ(kv_bytes_per_token_layer(DType::F16, 8, 128), 2u * 8 * 128 * 2);
  EXPECT_EQ(kv_bytes_per_token_layer(DType::F32, 8, 128), 2u * 8 * 128 * 4);
  EXPECT_EQ(kv_bytes_per_token_layer(DType::Q8_0, 8, 128), 2u * 8 * 4 * 34);  // 34 B per 32
  try {
    kv_bytes_per_token_layer(DType::Q4_0, 8, 128);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "KV cache type 'q4_0' is not supported (f16, f32, q8_0)");
  }
}

TEST(ModelFootprint, TiedOutputAndTensorTypes) {
  ModelHParams hp;
  hp.arch = "llama";
  hp.n_vocab = 1000;
  hp.n_ctx_train = 2048;
  hp.n_embd = 256;
  hp.n_layer = 2;
  hp.n_head = 4;
  hp.n_head_kv = 2;
  hp.head_dim = 64;
  hp.n_ff = 512;
  hp.n_rot = 64;
  const std::vector<TensorSize> tensors = {
      {"token_embd.weight", DType::Q8_0, 1000},  {"output_norm.weight", DType::F32, 10},
      {"blk.0.attn_q.weight", DType::Q4_K, 100}, {"blk.0.ffn_down.weight", DType::Q6_K, 200},
      {"blk.1.attn_q.weight", DType::Q4_K, 100}, {"blk.1.ffn_down.weight", DType::Q6_K, 220},
      {"rope_freqs.weight", DType::F32, 5}};
  const ModelFootprint fp = model_footprint(hp, tensors);
  EXPECT_EQ(fp.layer_weight_bytes, (std::vector<uint64_t>{300, 320}));
  EXPECT_EQ(fp.host_weight_bytes, 1005u);
  // No output.weight: the projection uses the embedding; another device needs a copy.
  EXPECT_EQ(fp.output_weight_bytes, 1010u);
  EXPECT_EQ(fp.output_weight_bytes_on_host, 10u);
  EXPECT_EQ(fp.total_weight_bytes(), 300u + 320 + 1005 + 10);
  EXPECT_EQ(fp.weight_bytes_by_type.at("q4_k"), 200u);
  EXPECT_EQ(fp.weight_bytes_by_type.at("q6_k"), 420u);
  // Each layer's distinct types; the tied projection is the embedding's type.
  EXPECT_EQ(fp.layer_types, (std::vector<std::vector<DType>>{{DType::Q4_K, DType::Q6_K},
                                                             {DType::Q4_K, DType::Q6_K}}));
  EXPECT_EQ(fp.output_type, DType::Q8_0);
  EXPECT_EQ(fp.kv_bytes_per_token_layer, 2u * 2 * 64 * 2);

  std::vector<TensorSize> bad = tensors;
  bad.push_back({"blk.2.attn_q.weight", DType::F32, 1});
  EXPECT_THROW(model_footprint(hp, bad), FormatError);
}

// The matrices the model repacks are counted at their loaded size: what
// repacking adds to the footprint is exactly what it adds to the weights the
// loaded model holds (ModelWeights::streamed_bytes_per_token counts them).
TEST(ModelFootprint, CountsRepackedMatricesAtTheirLoadedSize) {
  ThreadPool pool(2);
  for (DType t : {DType::Q4_0, DType::Q8_0, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K,
                  DType::Q6_K, DType::MXFP4}) {
    for (bool tied : {false, true}) {
      test::TempPath path(".gguf");
      MakeModelSpec spec;
      spec.n_layer = 2;
      spec.type = t;
      spec.tied = tied;
      spec.vocab_from = test::data_path("golden/random/rand-llama-tok512-F32.gguf");
      make_model(spec, path.path, pool);
      auto file = GgufFile::open(path.path);
      const ModelHParams hp = ModelHParams::from_gguf(*file);
      FootprintOptions packed_opts, plain_opts;
      plain_opts.repack = false;
      const auto fp_packed = model_footprint(*file, hp, packed_opts);
      const auto fp_plain = model_footprint(*file, hp, plain_opts);
      auto packed = ModelRunner::load(path.path, {.repack = true});
      auto plain = ModelRunner::load(path.path, {.repack = false});
      const int64_t model_growth =
          static_cast<int64_t>(packed->weights().streamed_bytes_per_token()) -
          static_cast<int64_t>(plain->weights().streamed_bytes_per_token());
      const int64_t plan_growth = static_cast<int64_t>(fp_packed.total_weight_bytes()) -
                                  static_cast<int64_t>(fp_plain.total_weight_bytes());
      EXPECT_EQ(plan_growth, model_growth) << dtype_name(t) << (tied ? " tied" : "");
      if (t == DType::Q3_K || t == DType::Q4_K || t == DType::Q5_K) {
        EXPECT_GT(model_growth, 0) << dtype_name(t);
      }
      // MXFP4's packed pairs are the file's bytes (16-row groups here are whole).
      if (t == DType::MXFP4) EXPECT_EQ(model_growth, 0);
    }
  }
}

// A CUDA device expands one quantized matrix at a time to f16 for cuBLAS,
// plus the activations: the largest quantized matrix counts (F16/F32 ones are
// used in place), whatever its place in the file.
TEST(ModelFootprint, CudaScratchHoldsTheLargestQuantizedMatrixInF16) {
  ModelHParams hp;
  hp.arch = "llama";
  hp.n_vocab = 1000;
  hp.n_ctx_train = 2048;
  hp.n_embd = 256;
  hp.n_layer = 1;
  hp.n_head = 4;
  hp.n_head_kv = 2;
  hp.head_dim = 64;
  hp.n_ff = 512;
  hp.n_rot = 64;
  std::vector<TensorSize> tensors = {
      {"token_embd.weight", DType::Q8_0, 1000, 256, 1000},
      {"blk.0.attn_q.weight", DType::Q4_K, 100, 256, 256},
      {"blk.0.ffn_down.weight", DType::Q6_K, 200, 512, 256},
      {"blk.0.ffn_up.weight", DType::F16, 300, 256, 4000}};  // larger, but used in place
  FootprintOptions opts;
  opts.max_batched_tokens = 64;
  EXPECT_EQ(model_footprint(hp, tensors, opts).cuda_matmul_scratch_bytes,
            2u * 256 * 1000 + 2u * 64 * 512 + kCudaAttentionMaxWorkspace);
  tensors.push_back({"output.weight", DType::Q4_0, 100, 256, 3000});
  EXPECT_EQ(model_footprint(hp, tensors, opts).cuda_matmul_scratch_bytes,
            2u * 256 * 3000 + 2u * 64 * 512 + kCudaAttentionMaxWorkspace);
}

}  // namespace
}  // namespace pagellm
