#include "backend/cpu/vec_dot.h"

#include <string>

#include "backend/cpu/dot_kernels.h"
#include "util/error.h"

namespace pagellm::cpu {

namespace {

detail::DotTileFn find_tile(DType wtype, CpuIsa isa) {
  if (isa == CpuIsa::Scalar) return detail::scalar_dot_tile(wtype);
  if (auto f = detail::float_dot_tile(wtype, isa)) return f;
  if (auto f = detail::legacy_dot_tile(wtype, isa)) return f;
  return detail::kquant_dot_tile(wtype, isa);
}

}  // namespace

detail::DotTileFn detail::dot_tile_fn(DType wtype, int64_t n, CpuIsa isa) {
  if (!isa_available(isa))
    throw Error(std::string("CPU variant not compiled in: ") + isa_name(isa));
  detail::DotTileFn f = find_tile(wtype, isa);
  if (!f) throw Error(std::string("no CPU dot product for weight type ") + dtype_name(wtype));
  if (n % dtype_block_size(wtype) != 0)
    throw Error("row length " + std::to_string(n) + " is not a multiple of the " +
                dtype_name(wtype) + " block size");
  return f;
}

bool dot_supported(DType wtype) {
  return detail::scalar_dot_tile(wtype) != nullptr;
}

void vec_dot_rows(DType wtype, int64_t n, const void* w, size_t w_row_stride, int64_t rows,
                  const void* x_act, float* out, CpuIsa isa) {
  detail::DotTileFn f = detail::dot_tile_fn(wtype, n, isa);
  f(n, static_cast<const uint8_t*>(w), w_row_stride, rows, static_cast<const uint8_t*>(x_act), 0, 1,
    out, 0);
}

void vec_dot_tile(DType wtype, int64_t n, const void* w, size_t w_row_stride, int64_t rows,
                  const void* x_act, size_t x_row_stride, int64_t cols, float* out,
                  int64_t out_col_stride, CpuIsa isa) {
  detail::DotTileFn f = detail::dot_tile_fn(wtype, n, isa);
  f(n, static_cast<const uint8_t*>(w), w_row_stride, rows, static_cast<const uint8_t*>(x_act),
    x_row_stride, cols, out, out_col_stride);
}

}  // namespace pagellm::cpu
