// ModelRunner::load: the file, its weights in each device's layout, and the
// layers placed where the options say (model/runner.h).
#include <fmt/format.h>

#include "model/backend_support.h"
#include "model/registry.h"
#include "model/runner.h"
#include "util/error.h"

namespace pagellm {

namespace {

void check_placements(const std::vector<KvPoolPlacement>& placements, int32_t begin,
                      int32_t n_layer) {
  int32_t next = begin;
  for (const auto& p : placements) {
    if (p.layer_begin != next || p.layer_end <= p.layer_begin)
      throw ConfigError(fmt::format(
          "layer placement for '{}' covers layers [{}, {}), expected a range starting at {}",
          p.device, p.layer_begin, p.layer_end, next));
    next = p.layer_end;
  }
  if (next != n_layer)
    throw ConfigError(
        fmt::format("layer placements cover layers up to {}, the model has {}", next, n_layer));
}

// Drops empty ranges (a device of a plan that holds no layer).
std::vector<KvPoolPlacement> non_empty(const std::vector<KvPoolPlacement>& placements) {
  std::vector<KvPoolPlacement> out;
  for (const auto& p : placements)
    if (p.layer_end > p.layer_begin) out.push_back(p);
  return out;
}

}  // namespace

std::unique_ptr<ModelRunner> ModelRunner::load(const std::string& path, ModelLoadOptions opts) {
  std::unique_ptr<ModelRunner> m(new ModelRunner());
  m->file_ = GgufFile::open(path, {.use_mmap = opts.use_mmap, .mlock = opts.mlock});
  m->hp_ = ModelHParams::from_gguf(*m->file_);
  m->arch_ = &find_architecture(m->hp_.arch, path);
  m->w_ = ModelWeights::load(*m->file_, m->hp_, *m->arch_);
  for (size_t i = 0; i < m->hp_.rope_tables.size(); ++i) {
    const RopeTableSpec& r = m->hp_.rope_tables[i];
    m->ropes_.push_back({r.n_rot > 0 ? r.n_rot : m->hp_.n_rot, r.freq_base, r.freq_scale,
                         m->w_.rope_factors[i], r.attn_factor});
  }
  m->factory_ = opts.backend_factory ? opts.backend_factory : BackendFactory(make_backend);
  if (m->hp_.n_embd_per_layer > 0) m->per_layer_inputs_.init(m->hp_, m->w_);
  const int32_t n_layer = m->hp_.n_layer;
  m->stage_begin_ = opts.stage_begin;
  m->stage_end_ = opts.stage_end > 0 ? opts.stage_end : n_layer;
  if (m->stage_begin_ < 0 || m->stage_begin_ >= m->stage_end_ || m->stage_end_ > n_layer)
    throw ConfigError(
        fmt::format("pipeline stage [{}, {}) is not a layer range of this {}-layer model",
                    m->stage_begin_, m->stage_end_, n_layer));
  const std::vector<KvPoolPlacement> placements = m->checked_placements(opts.placements);
  for (const auto& p : placements)
    check_backend_supports(m->backend_of(p.device), p, m->hp_, m->ropes_);
  if (!opts.experts_on_host.empty()) {
    if (opts.experts_on_host.size() != static_cast<size_t>(n_layer))
      throw ConfigError(fmt::format("expert placement lists {} layers, the model has {}",
                                    opts.experts_on_host.size(), n_layer));
    if (!m->hp_.moe()) throw ConfigError("expert placement given for a model without experts");
    m->experts_on_host_ = opts.experts_on_host;
  }

  // Layers that run from host memory get their backend's layout (the CPU
  // repacks); layers on a device keep the file's layout and are copied there.
  if (opts.f32_weights) {
    m->w_.dequantize_to_f32(*m->file_);
  } else if (opts.repack) {
    // Layers of other stages count as "not here": they stay as mapped.
    std::vector<const Backend*> dense(static_cast<size_t>(n_layer), nullptr);
    for (const auto& p : placements) {
      const Backend& b = m->backend_of(p.device);
      if (!b.uses_host_memory()) continue;
      for (int32_t l = p.layer_begin; l < p.layer_end; ++l) dense[static_cast<size_t>(l)] = &b;
    }
    std::vector<const Backend*> experts = dense;
    for (int32_t l = m->stage_begin_; l < m->stage_end_; ++l)
      if (m->experts_on_host(l)) experts[static_cast<size_t>(l)] = &m->backend_of("host");
    m->w_.repack(*m->file_, opts.mlock, dense, experts,
                 m->stage_end_ == n_layer ? dense.back() : nullptr);
  }
  for (const auto& p : placements) {
    Backend& b = m->backend_of(p.device);
    if (b.uses_host_memory()) continue;
    m->weights_on_devices_ = true;
    for (int32_t l = p.layer_begin; l < p.layer_end; ++l)
      m->device_weights_.upload_layer(b, *m->file_, m->w_.layers[static_cast<size_t>(l)],
                                      /*experts=*/!m->experts_on_host(l));
    if (p.layer_end == n_layer) m->device_weights_.upload_output(b, *m->file_, m->w_, m->hp_);
  }
  m->place(placements);
  return m;
}

std::vector<KvPoolPlacement> ModelRunner::checked_placements(
    const std::vector<KvPoolPlacement>& requested) const {
  std::vector<KvPoolPlacement> placements = non_empty(requested);
  if (placements.empty()) placements = {{"host", stage_begin_, stage_end_}};
  check_placements(placements, stage_begin_, stage_end_);
  return placements;
}

}  // namespace pagellm
