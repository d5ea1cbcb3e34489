#include "model/weights.h"

#include <fmt/format.h>

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <utility>

#include "model/architecture.h"

#include "tensor/convert.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace pagellm {

uint64_t WeightMatrix::bytes() const {
  return static_cast<uint64_t>(stack_view().bytes());
}

WeightMatrix WeightMatrix::expert(int32_t e) const {
  WeightMatrix m = *this;
  m.n_expert = 1;
  // n_out / layout_rows(layout) units of row_bytes per expert (whole groups: repack()).
  const size_t stride = static_cast<size_t>(n_out / layout_rows(layout)) * row_bytes;
  m.data = data + static_cast<size_t>(e) * stride;
  return m;
}

WeightMatrix WeightMatrix::rows(int64_t row0, int64_t n) const {
  const int64_t g = layout_rows(layout);
  if (n_expert != 1 || row0 < 0 || n <= 0 || row0 + n > n_out || row0 % g != 0 || n % g != 0)
    throw Error(fmt::format("rows [{}, {}) of a matrix of {} rows in units of {}", row0, row0 + n,
                            n_out, g));
  WeightMatrix m = *this;
  m.n_out = n;
  m.data = data + static_cast<size_t>(row0 / g) * row_bytes;
  return m;
}

uint64_t ModelWeights::repack(GgufFile& f, bool lock, const std::vector<const Backend*>& dense,
                              const std::vector<const Backend*>& experts,
                              const Backend* output_backend) {
  uint64_t total = 0;
  ThreadPool pool(ThreadPool::physical_cores());
  auto prepare = [&](WeightMatrix& m, const Backend* b) {
    if (!b || m.layout != WeightLayout::Rows) return;
    size_t bytes = 0;
    const MatrixView got = b->prepare_weights(
        m.stack_view(), m.n_out,
        [&](size_t n) {
          // Huge pages where possible: a decode step streams all of these.
          std::unique_ptr<uint8_t, HostPagesFree> owned(
              static_cast<uint8_t*>(allocate_host_pages(n)), HostPagesFree{n});
          packed_.push_back(std::move(owned));
          bytes = n;
          return static_cast<void*>(packed_.back().get());
        },
        pool);
    if (got.data == m.data) return;  // read in place
    if (lock && ::mlock(got.data, bytes) != 0)
      throw SystemError(
          fmt::format("cannot mlock {} bytes of repacked weights (raise `ulimit -l` "
                      "or drop --mlock)",
                      bytes));
    f.release(m.data, static_cast<size_t>(m.total_rows()) * m.row_bytes);
    m.data = static_cast<const uint8_t*>(got.data);
    m.row_bytes = got.row_stride;
    m.layout = got.layout;
    total += bytes;
  };
  for (size_t l = 0; l < layers.size(); ++l) {
    const Backend* d = l < dense.size() ? dense[l] : nullptr;
    const Backend* x = l < experts.size() ? experts[l] : nullptr;
    layers[l].for_each_matrix([&](WeightMatrix& m) { prepare(m, m.n_expert > 1 ? x : d); });
  }
  if (!tied_output) prepare(output, output_backend);
  return total;
}

void ModelWeights::dequantize_to_f32(GgufFile& f) {
  ThreadPool pool(ThreadPool::physical_cores());
  auto convert = [&](WeightMatrix& m) {
    if (m.type == DType::F32 || m.layout != WeightLayout::Rows) return;
    const int64_t n_rows = m.total_rows();
    owned_.emplace_back(new float[static_cast<size_t>(m.n_in * n_rows)]);
    float* dst = owned_.back().get();
    pool.parallel_for(n_rows, [&](int64_t r0, int64_t r1, int) {
      for (int64_t r = r0; r < r1; ++r) dequantize_row(m.type, m.row(r), dst + r * m.n_in, m.n_in);
    });
    if (&m != &output || !tied_output) f.release(m.data, static_cast<size_t>(n_rows) * m.row_bytes);
    m.data = reinterpret_cast<const uint8_t*>(dst);
    m.type = DType::F32;
    m.row_bytes = static_cast<size_t>(m.n_in) * sizeof(float);
  };
  for (LayerWeights& L : layers) L.for_each_matrix(convert);
  convert(output);
}

uint64_t ModelWeights::streamed_bytes_per_token() const {
  uint64_t b = output.bytes();
  for (const LayerWeights& L : layers) b += L.bytes_per_token(experts_used);
  return b;
}

uint64_t LayerWeights::bytes() const {
  uint64_t b = 0;
  for_each_matrix([&](const WeightMatrix& m) { b += m.bytes(); });
  return b;
}

uint64_t LayerWeights::bytes_per_token(int32_t experts_used) const {
  uint64_t b = 0;
  for_each_matrix([&](const WeightMatrix& m) {
    b += m.n_expert > 1 ? m.bytes() / static_cast<uint64_t>(m.n_expert) *
                              static_cast<uint64_t>(std::min(experts_used, m.n_expert))
                        : m.bytes();
  });
  return b;
}

namespace {

class Loader {
 public:
  Loader(const GgufFile& f, std::vector<std::unique_ptr<float[]>>& owned) : f_(f), owned_(owned) {}

  const GgufTensorInfo& find(const std::string& name) const {
    const auto* t = f_.find_tensor(name);
    if (!t) throw FormatError(fmt::format("{}: missing tensor '{}'", f_.path(), name));
    return *t;
  }

  WeightMatrix matrix(const std::string& name, int64_t n_in, int64_t n_out) const {
    const auto& t = find(name);
    return matrix_of(t, n_in, n_out);
  }

  // A stack of n_expert matrices, ne = [n_in, n_out, n_expert].
  WeightMatrix experts(const std::string& name, int64_t n_in, int64_t n_out,
                       int64_t n_expert) const {
    const auto& t = find(name);
    if (t.ne.size() != 3 || t.ne[0] != n_in || t.ne[1] != n_out || t.ne[2] != n_expert)
      throw FormatError(fmt::format("{}: tensor '{}' has shape {}, expected [{}, {}, {}]",
                                    f_.path(), t.name, shape(t), n_in, n_out, n_expert));
    WeightMatrix m;
    m.type = t.type;
    m.n_in = n_in;
    m.n_out = n_out;
    m.n_expert = static_cast<int32_t>(n_expert);
    m.row_bytes = dtype_row_bytes(t.type, n_in);
    m.data = t.data;
    return m;
  }

  // A stack of per-head matrices, ne = [n_in, n_out, n_heads], as one matrix
  // of n_out * n_heads rows.
  WeightMatrix heads(const std::string& name, int64_t n_in, int64_t n_out, int64_t n_heads) const {
    WeightMatrix m = experts(name, n_in, n_out, n_heads);
    m.n_out = n_out * n_heads;
    m.n_expert = 1;
    return m;
  }

  WeightMatrix matrix_of(const GgufTensorInfo& t, int64_t n_in, int64_t n_out) const {
    // A 1-D [n_in] tensor is a one-row matrix (llama.cpp multiplies
    // ffn_gate_inp_shexp as one).
    const bool row = n_out == 1 && t.ne.size() == 1 && t.ne[0] == n_in;
    if (!row && (t.ne.size() != 2 || t.ne[0] != n_in || t.ne[1] != n_out))
      throw FormatError(fmt::format("{}: tensor '{}' has shape {}, expected [{}, {}]", f_.path(),
                                    t.name, shape(t), n_in, n_out));
    WeightMatrix m;
    m.type = t.type;
    m.n_in = n_in;
    m.n_out = n_out;
    m.row_bytes = dtype_row_bytes(t.type, n_in);
    m.data = t.data;
    return m;
  }

  // Rows [row0, row0 + rows) of a fused matrix of fused_rows rows.
  WeightMatrix part(const std::string& name, int64_t n_in, int64_t row0, int64_t rows,
                    int64_t fused_rows) const {
    WeightMatrix m = matrix(name, n_in, fused_rows);
    m.data += static_cast<size_t>(row0) * m.row_bytes;
    m.n_out = rows;
    return m;
  }

  // n1 > 0: a 2-D tensor of shape [n, n1], read as n * n1 floats.
  const float* vector(const std::string& name, int64_t n, bool optional = false, int64_t n1 = 0) const {
    const auto* t = f_.find_tensor(name);
    if (!t) {
      if (optional) return nullptr;
      throw FormatError(fmt::format("{}: missing tensor '{}'", f_.path(), name));
    }
    const bool ok = n1 > 0 ? t->ne.size() == 2 && t->ne[0] == n && t->ne[1] == n1
                           : t->ne.size() == 1 && t->ne[0] == n;
    if (!ok)
      throw FormatError(fmt::format("{}: tensor '{}' has shape {}, expected [{}]", f_.path(),
                                    t->name, shape(*t),
                                    n1 > 0 ? fmt::format("{}, {}", n, n1) : std::to_string(n)));
    if (n1 > 0) n *= n1;
    if (t->type == DType::F32 && reinterpret_cast<uintptr_t>(t->data) % alignof(float) == 0)
      return reinterpret_cast<const float*>(t->data);
    owned_.emplace_back(new float[static_cast<size_t>(n)]);
    dequantize_row(t->type, t->data, owned_.back().get(), n);
    return owned_.back().get();
  }

 private:
  static std::string shape(const GgufTensorInfo& t) {
    std::string s = "[";
    for (size_t i = 0; i < t.ne.size(); ++i) s += (i ? ", " : "") + std::to_string(t.ne[i]);
    return s + "]";
  }

  const GgufFile& f_;
  std::vector<std::unique_ptr<float[]>>& owned_;
};

}  // namespace

ModelWeights ModelWeights::load(const GgufFile& f, const ModelHParams& hp,
                                const Architecture& arch) {
  ModelWeights w;
  w.experts_used = hp.n_expert_used;
  Loader ld(f, w.owned_);
  const int64_t E = hp.n_embd, V = hp.n_vocab;
  w.token_embd = ld.matrix("token_embd.weight", E, V);
  w.output_norm = ld.vector("output_norm.weight", E);
  if (f.find_tensor("output.weight")) {
    w.output = ld.matrix("output.weight", E, V);
  } else {
    w.output = w.token_embd;
    w.tied_output = true;
  }
  for (const RopeTableSpec& r : hp.rope_tables) {
    const float* file = r.factors.empty() ? nullptr : ld.vector(r.factors, hp.n_rot / 2);
    if (r.yarn.enabled()) {  // YaRN's divisors, times the file's when it has some
      const std::vector<float> y = yarn_freq_factors(r.yarn, r.n_rot > 0 ? r.n_rot : hp.n_rot, r.freq_base);
      float* own = w.owned_.emplace_back(new float[y.size()]).get();
      for (size_t i = 0; i < y.size(); ++i) own[i] = y[i] * (file ? file[i] : 1.0f);
      file = own;
    }
    w.rope_factors.push_back(file);
  }
  w.layers.resize(static_cast<size_t>(hp.n_layer));
  TensorList specs;
  for (int32_t l = -1; l < hp.n_layer; ++l) {  // -1: the family's tensors outside the layers
    LayerWeights& L = l < 0 ? w.extra : w.layers[static_cast<size_t>(l)];
    specs.clear();
    if (l < 0)
      arch.model_tensors(hp, specs);
    else
      arch.layer_tensors(hp, l, specs);
    for (const TensorSpec& t : specs) {
      if (!t.matrix) {
        L.vectors[t.role] = {ld.vector(t.name, t.n_in, t.optional, t.n_out),
                             t.n_out > 0 ? t.n_in * t.n_out : t.n_in};
        if (!L.vectors[t.role].data) L.vectors[t.role].n = 0;
      } else if (t.optional && !f.find_tensor(t.name)) {
        continue;
      } else {
        L.matrices[t.role] = t.n_heads > 0   ? ld.heads(t.name, t.n_in, t.n_out, t.n_heads)
                             : t.n_expert > 0  ? ld.experts(t.name, t.n_in, t.n_out, t.n_expert)
                             : t.fused_rows > 0 ? ld.part(t.name, t.n_in, t.row0, t.n_out, t.fused_rows)
                                                : ld.matrix(t.name, t.n_in, t.n_out);
      }
    }
  }
  return w;
}

}  // namespace pagellm
