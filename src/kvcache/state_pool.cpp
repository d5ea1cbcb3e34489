#include "kvcache/state_pool.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "util/error.h"
#include "util/host_pages.h"

namespace pagellm {

size_t StatePoolShape::slot_bytes() const {
  return layers.size() * static_cast<size_t>(conv_floats + delta_floats) * sizeof(float);
}

StatePool::StatePool(StatePoolShape shape, Backend* backend)
    : shape_(std::move(shape)), backend_(backend) {
  if (shape_.n_slots < 0 || shape_.conv_floats < 0 || shape_.delta_floats < 0)
    throw ConfigError(fmt::format("invalid recurrent state pool: {} slots", shape_.n_slots));
  bytes_ = shape_.total_bytes();
  if (bytes_ == 0) return;
  try {
    data_ = static_cast<float*>(backend_ ? backend_->allocate(bytes_) : allocate_host_pages(bytes_));
  } catch (const SystemError& e) {
    throw SystemError(fmt::format("recurrent state: {}", e.what()));
  }
  if (backend_ && !backend_->uses_host_memory()) {
    const std::vector<float> zeros(bytes_ / sizeof(float), 0.0f);
    backend_->upload(data_, zeros.data(), bytes_);
  } else {
    std::memset(data_, 0, bytes_);
  }
}

StatePool::~StatePool() {
  if (!data_) return;
  if (backend_)
    backend_->deallocate(data_, bytes_);
  else
    free_host_pages(data_, bytes_);
}

int32_t StatePool::index_of(int32_t layer) const {
  const auto it = std::lower_bound(shape_.layers.begin(), shape_.layers.end(), layer);
  return it != shape_.layers.end() && *it == layer ? static_cast<int32_t>(it - shape_.layers.begin())
                                                   : -1;
}

float* StatePool::layer_base(int32_t layer) {
  const int32_t i = index_of(layer);
  if (i < 0) throw Error(fmt::format("layer {} has no recurrent state here", layer));
  return data_ + static_cast<size_t>(i) * static_cast<size_t>(shape_.n_slots) *
                     static_cast<size_t>(shape_.conv_floats + shape_.delta_floats);
}

float* StatePool::conv(int32_t layer) {
  return layer_base(layer);
}

float* StatePool::delta(int32_t layer) {
  return layer_base(layer) + static_cast<size_t>(shape_.n_slots) * static_cast<size_t>(shape_.conv_floats);
}

void StatePool::check_slot(int32_t slot) const {
  if (slot < 0 || slot >= shape_.n_slots)
    throw Error(fmt::format("recurrent state slot {} outside [0, {})", slot, shape_.n_slots));
}

void StatePool::clear_slot(int32_t slot) {
  check_slot(slot);
  const size_t most = static_cast<size_t>(std::max(shape_.conv_floats, shape_.delta_floats));
  const std::vector<float> zeros(backend_ && !backend_->uses_host_memory() ? most : 0, 0.0f);
  auto zero = [&](float* p, int64_t n) {
    if (n == 0) return;
    if (zeros.empty())
      std::memset(p, 0, static_cast<size_t>(n) * sizeof(float));
    else
      backend_->upload(p, zeros.data(), static_cast<size_t>(n) * sizeof(float));
  };
  for (int32_t layer : shape_.layers) {
    zero(conv(layer) + static_cast<int64_t>(slot) * shape_.conv_floats, shape_.conv_floats);
    zero(delta(layer) + static_cast<int64_t>(slot) * shape_.delta_floats, shape_.delta_floats);
  }
}

void StatePool::copy_slot(int32_t src, int32_t dst) {
  check_slot(src);
  check_slot(dst);
  if (src == dst) return;
  auto move = [&](float* base, int64_t n) {
    if (n == 0) return;
    const size_t bytes = static_cast<size_t>(n) * sizeof(float);
    float* to = base + static_cast<int64_t>(dst) * n;
    const float* from = base + static_cast<int64_t>(src) * n;
    if (backend_ && !backend_->uses_host_memory())
      backend_->copy(to, from, bytes);
    else
      std::memcpy(to, from, bytes);
  };
  for (int32_t layer : shape_.layers) {
    move(conv(layer), shape_.conv_floats);
    move(delta(layer), shape_.delta_floats);
  }
}

}  // namespace pagellm
