// The model's tensors, located in the GGUF file (mmap'd or read into memory)
// as the architecture's tensor table (model/tensor_spec.h) describes them.
// Matrices stay in the file's buffer in their stored type, except that
// repack() may copy the layer and output matrices that the backend running
// them from host memory has a faster layout for (Backend::prepare_weights)
// into owned memory and give the file's pages back. Small 1-D tensors that
// are not F32 are converted into owned memory.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "backend/matrix_view.h"
#include "gguf/gguf_reader.h"
#include "model/hparams.h"
#include "model/tensor_spec.h"
#include "tensor/dtype.h"
#include "util/host_pages.h"

namespace pagellm {

class Architecture;

// A 2-D weight stored as GGUF ne = [n_in, n_out]: n_out rows of n_in elements.
// In a backend's own layout (not Rows): row_bytes is the bytes per group of
// layout_rows(layout) rows and row() is not available. n_out == 0: absent.
// A stack of experts (GGUF ne = [n_in, n_out, n_expert]) is n_expert such
// matrices one after another: expert e is rows [e * n_out, (e + 1) * n_out)
// of one matrix of n_out * n_expert rows (a backend's layout keeps that: no
// group straddles two experts). expert(e) is one of them as a matrix.
struct WeightMatrix {
  DType type = DType::F32;
  int64_t n_in = 0;
  int64_t n_out = 0;
  size_t row_bytes = 0;
  const uint8_t* data = nullptr;
  WeightLayout layout = WeightLayout::Rows;
  int32_t n_expert = 1;
  const uint8_t* row(int64_t r) const { return data + static_cast<size_t>(r) * row_bytes; }
  // Bytes of all experts.
  uint64_t bytes() const;
  bool present() const { return data != nullptr; }
  // Rows of all experts together.
  int64_t total_rows() const { return n_out * n_expert; }
  // Expert e (0 <= e < n_expert) as a matrix of its own (itself when n_expert == 1).
  WeightMatrix expert(int32_t e) const;
  // Rows [row0, row0 + n) of a one-expert matrix as a matrix of its own (a
  // head of a TensorSpec::heads stack); Error unless both are whole units of
  // the layout.
  WeightMatrix rows(int64_t row0, int64_t n) const;
  MatrixView view() const { return {type, n_in, n_out, data, row_bytes, layout}; }
  // All experts as one matrix of total_rows() rows.
  MatrixView stack_view() const { return {type, n_in, total_rows(), data, row_bytes, layout}; }
};

// A 1-D f32 tensor (null: absent).
struct WeightVector {
  const float* data = nullptr;
  int64_t n = 0;
};

// One layer's tensors by role; which are present is the architecture's
// business (its tensor table).
struct LayerWeights {
  std::array<WeightMatrix, kMatrixRoles> matrices;
  std::array<WeightVector, kVectorRoles> vectors;

  const WeightMatrix& matrix(MatrixRole r) const { return matrices[static_cast<size_t>(r)]; }
  WeightMatrix& matrix(MatrixRole r) { return matrices[static_cast<size_t>(r)]; }
  const float* vector(VectorRole r) const { return vectors[static_cast<size_t>(r)].data; }

  // fn(WeightMatrix&) for each present matrix, in role order.
  template <class Fn>
  void for_each_matrix(Fn&& fn) {
    for (WeightMatrix& m : matrices)
      if (m.present()) fn(m);
  }
  template <class Fn>
  void for_each_matrix(Fn&& fn) const {
    for (const WeightMatrix& m : matrices)
      if (m.present()) fn(m);
  }
  template <class Fn>
  void for_each_vector(Fn&& fn) {
    for (WeightVector& v : vectors)
      if (v.data) fn(v);
  }

  uint64_t bytes() const;
  // Bytes one token reads: every matrix, of an expert stack only the
  // `experts_used` experts a token is routed to.
  uint64_t bytes_per_token(int32_t experts_used) const;
};

struct ModelWeights {
  WeightMatrix token_embd;
  const float* output_norm = nullptr;
  WeightMatrix output;  // == token_embd when the file has no output.weight (tied)
  bool tied_output = false;
  // Frequency factors of each RoPE table (ModelHParams::rope_tables), or null.
  std::vector<const float*> rope_factors;
  std::vector<LayerWeights> layers;
  // The family's tensors outside the layers (Architecture::model_tensors),
  // in host memory: Gemma 4's per-layer input tables.
  LayerWeights extra;

  // Finds and checks every tensor of the architecture's table; throws
  // FormatError naming the tensor.
  static ModelWeights load(const GgufFile& f, const ModelHParams& hp, const Architecture& arch);

  // Bytes of the matrices one decode step of one token streams: every layer
  // matrix (of expert stacks, the experts a token uses) and the output
  // projection once.
  uint64_t streamed_bytes_per_token() const;
  int32_t experts_used = 0;  // per token, in MoE layers (hp.n_expert_used)

  // Lays out every layer matrix (and an untied output) for the backend that
  // runs it from host memory (Backend::prepare_weights: the CPU backend
  // repacks the types it has a faster layout for); those copied go into owned
  // memory (huge pages where possible; with `lock` mlock'ed) and the file's
  // pages of the originals are released. `dense[l]` runs layer l's matrices
  // but its expert stacks, `experts[l]` those, `output_backend` the output;
  // null: run elsewhere (a device that reads the file's layout, another
  // stage), left as mapped. Returns the bytes copied. The token embedding
  // stays in the file (it is read by rows).
  uint64_t repack(GgufFile& f, bool lock, const std::vector<const Backend*>& dense,
                  const std::vector<const Backend*>& experts, const Backend* output_backend);

  // Converts every layer matrix and the output projection to owned F32 rows
  // (ModelLoadOptions::f32_weights); the token embedding stays in the file.
  void dequantize_to_f32(GgufFile& f);

 private:
  std::vector<std::unique_ptr<float[]>> owned_;                  // converted 1-D tensors
  std::vector<std::unique_ptr<uint8_t, HostPagesFree>> packed_;  // allocate_host_pages
};

}  // namespace pagellm
