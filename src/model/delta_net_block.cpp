#include "model/delta_net_block.h"

#include <fmt/format.h>

#include <cmath>

#include "util/error.h"

namespace pagellm {

namespace {

std::string tensor(int32_t layer, const char* what) {
  return fmt::format("blk.{}.{}", layer, what);
}

}  // namespace

void configure_delta_net_hybrid(const GgufFile& f, ModelHParams& hp) {
  const std::string a = hp.arch + ".";
  hp.rope_style = RopeStyle::kNeox;
  hp.attn_output_gate = true;
  DeltaNetShape& d = hp.delta_net;
  d.conv_kernel = require_positive_key(f, a + "ssm.conv_kernel", 64);
  d.d_k = require_positive_key(f, a + "ssm.state_size", 4096);
  d.n_k_heads = require_positive_key(f, a + "ssm.group_count", 4096);
  d.n_v_heads = require_positive_key(f, a + "ssm.time_step_rank", 4096);
  const int32_t inner = require_positive_key(f, a + "ssm.inner_size");
  if (d.n_v_heads % d.n_k_heads != 0 || inner % d.n_v_heads != 0)
    throw FormatError(fmt::format(
        "{}: ssm.time_step_rank {} must be a multiple of ssm.group_count {} and divide "
        "ssm.inner_size {}",
        f.path(), d.n_v_heads, d.n_k_heads, inner));
  d.d_v = inner / d.n_v_heads;
  if (const GgufValue* v = f.find(a + "attention.recurrent_layers")) {
    const auto& flags = v->as_array(a + "attention.recurrent_layers");
    if (flags.size() != static_cast<size_t>(hp.n_layer))
      throw FormatError(fmt::format("{}: attention.recurrent_layers has {} entries for {} layers",
                                    f.path(), flags.size(), hp.n_layer));
    for (int32_t l = 0; l < hp.n_layer; ++l)
      hp.layers[static_cast<size_t>(l)].recurrent =
          flags[static_cast<size_t>(l)].as_bool(a + "attention.recurrent_layers");
  } else {
    const int32_t interval = require_positive_key(f, a + "full_attention_interval", 4096);
    for (int32_t l = 0; l < hp.n_layer; ++l)
      hp.layers[static_cast<size_t>(l)].recurrent = (l + 1) % interval != 0;
  }
}

void delta_net_tensors(const ModelHParams& hp, int32_t l, TensorList& out) {
  const DeltaNetShape& d = hp.delta_net;
  const int64_t E = hp.n_embd, C = d.channels(), I = d.inner(), H = d.n_v_heads;
  out.push_back(TensorSpec::vec(VectorRole::kAttnNorm, tensor(l, "attn_norm.weight"), E));
  out.push_back(TensorSpec::mat(MatrixRole::kSsmIn, tensor(l, "attn_qkv.weight"), E, C));
  out.push_back(TensorSpec::mat(MatrixRole::kSsmZ, tensor(l, "attn_gate.weight"), E, I));
  out.push_back(TensorSpec::vec2(VectorRole::kSsmConv, tensor(l, "ssm_conv1d.weight"), d.conv_kernel, C));
  out.push_back(TensorSpec::vec(VectorRole::kSsmDtBias, tensor(l, "ssm_dt.bias"), H));
  out.push_back(TensorSpec::vec(VectorRole::kSsmA, tensor(l, "ssm_a"), H));
  out.push_back(TensorSpec::mat(MatrixRole::kSsmBeta, tensor(l, "ssm_beta.weight"), E, H));
  out.push_back(TensorSpec::mat(MatrixRole::kSsmAlpha, tensor(l, "ssm_alpha.weight"), E, H));
  out.push_back(TensorSpec::vec(VectorRole::kSsmNorm, tensor(l, "ssm_norm.weight"), d.d_v));
  out.push_back(TensorSpec::mat(MatrixRole::kSsmOut, tensor(l, "ssm_out.weight"), I, E));
}

void delta_net_block(LayerContext& c) {
  const ModelHParams& hp = c.hp;
  const DeltaNetShape& d = hp.delta_net;
  const LayerWeights& w = c.w;
  const int64_t T = c.T, C = d.channels(), I = d.inner(), H = d.n_v_heads;
  float* qkv = c.extra;
  float* conv = qkv + T * C;
  float* z = conv + T * C;
  float* alpha = z + T * I;
  float* beta = alpha + T * H;
  float* out = beta + T * H;
  const MatrixView w_in = w.matrix(MatrixRole::kSsmIn).view(), w_z = w.matrix(MatrixRole::kSsmZ).view(),
                   w_beta = w.matrix(MatrixRole::kSsmBeta).view(),
                   w_alpha = w.matrix(MatrixRole::kSsmAlpha).view(),
                   w_out = w.matrix(MatrixRole::kSsmOut).view();
  c.b.norm_matmul(c.x, w.vector(VectorRole::kAttnNorm), hp.rms_eps, c.h, T,
                  {{&w_in, qkv}, {&w_z, z}, {&w_beta, beta}, {&w_alpha, alpha}});

  SsmConvArgs conv_args;
  conv_args.x = qkv;
  conv_args.x_stride = C;
  conv_args.y = conv;
  conv_args.y_stride = C;
  conv_args.weight = w.vector(VectorRole::kSsmConv);
  conv_args.states = c.conv_states;
  conv_args.state_stride = c.conv_stride;
  conv_args.channels = static_cast<int32_t>(C);
  conv_args.kernel = d.conv_kernel;
  conv_args.silu = true;
  c.b.ssm_conv(conv_args, *c.recurrent);

  GatedDeltaArgs g;
  g.q = conv;
  g.k = conv + static_cast<int64_t>(d.n_k_heads) * d.d_k;
  g.v = conv + 2 * static_cast<int64_t>(d.n_k_heads) * d.d_k;
  g.qkv_stride = C;
  g.alpha = alpha;
  g.b = beta;
  g.gate_stride = H;
  g.dt_bias = w.vector(VectorRole::kSsmDtBias);
  g.a = w.vector(VectorRole::kSsmA);
  g.states = c.delta_states;
  g.state_stride = c.delta_stride;
  g.out = out;
  g.out_stride = I;
  g.n_k_heads = d.n_k_heads;
  g.n_v_heads = d.n_v_heads;
  g.d_k = d.d_k;
  g.d_v = d.d_v;
  g.eps = hp.rms_eps;
  g.q_scale = 1.0f / std::sqrt(static_cast<float>(d.d_k));
  c.b.gated_delta_rule(g, *c.recurrent);

  // Per head: RMSNorm(o) * silu(z), then the residual add in the product's epilogue.
  c.b.rms_norm(out, w.vector(VectorRole::kSsmNorm), out, T * H, d.d_v, hp.rms_eps);
  c.b.silu_mul(z, out, T * I);
  c.b.matmul(z, T, {{.w = &w_out, .y = c.h, .add_to = c.x}});
}

}  // namespace pagellm
