// One model family (general.architecture): its own hyperparameters, its
// tensor table and how a layer runs, built from the shared blocks of
// model/blocks.h. A family is one file in this folder plus a line in
// registry.cpp; the runner, engine and planner never name one.
#pragma once

#include <cstdint>

#include "gguf/gguf_reader.h"
#include "model/hparams.h"
#include "model/tensor_spec.h"

namespace pagellm {

struct LayerContext;

class Architecture {
 public:
  virtual ~Architecture() = default;

  // general.architecture
  virtual const char* name() const = 0;
  // The family's keys and rules on top of the common ones (hp has them, with
  // one RoPE table and full attention on every layer); FormatError on a bad key.
  virtual void configure(const GgufFile& f, ModelHParams& hp) const = 0;
  // Appends the tensors of layer `layer` to `out`.
  virtual void layer_tensors(const ModelHParams& hp, int32_t layer, TensorList& out) const = 0;
  // Runs one layer of a step on the residual stream c.x.
  virtual void run_layer(LayerContext& c) const = 0;
  // The family's tensors outside the layers besides the embedding, output
  // norm and projection (ModelWeights::extra); the default: none.
  virtual void model_tensors(const ModelHParams& /*hp*/, TensorList& /*out*/) const {}
};

}  // namespace pagellm
