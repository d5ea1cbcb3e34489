#include "backend/cpu/packed_weights.h"

#include <cstddef>
#include <cstring>
#include <string>
#include <type_traits>

#include "backend/matrix_view.h"
#include "tensor/blocks.h"
#include "tensor/quant_internal.h"
#include "util/error.h"

namespace pagellm::cpu {

namespace {

// Code bytes per block per group (C in the header).
size_t code_bytes(DType t) {
  switch (t) {
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::IQ4_NL:
    case DType::MXFP4:
      return 256;
    case DType::Q5_0:
    case DType::Q5_1:
      return 320;
    case DType::Q8_0:
      return 512;
    default:
      throw Error(std::string("no Rows16 layout for weight type ") + dtype_name(t));
  }
}

// Scale bytes per block per group (S in the header): d, and m where the type
// has one; MXFP4's exponent bytes.
size_t scale_bytes(DType t) {
  if (t == DType::MXFP4) return 16;
  return t == DType::Q4_1 || t == DType::Q5_1 ? 64 : 32;
}

// The nibble types (Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL; block type B): row `lane`'s
// block into the codes cb and scales sc of its group (see the header).
template <class B>
void put_nibbles(uint8_t* cb, uint8_t* sc, int lane, const B& blk) {
  if constexpr (requires { blk.qh; }) {
    uint32_t qh;
    std::memcpy(&qh, blk.qh, 4);
    for (int j = 0; j < 4; ++j) {
      uint8_t bits = 0;
      for (int k = 0; k < 8; ++k) bits |= static_cast<uint8_t>(((qh >> (4 * k + j)) & 1) << k);
      cb[4 * lane + j] = bits;
    }
    cb += 64;
  }
  for (int k = 0; k < 4; ++k) std::memcpy(cb + 64 * k + 4 * lane, blk.qs + 4 * k, 4);
  if constexpr (requires { blk.e; })
    sc[lane] = blk.e;
  else
    std::memcpy(sc + 2 * lane, &blk.d, 2);
  if constexpr (requires { blk.m; }) std::memcpy(sc + 32 + 2 * lane, &blk.m, 2);
}

template <class B>
void get_nibbles(const uint8_t* cb, const uint8_t* sc, int lane, B& blk) {
  if constexpr (requires { blk.qh; }) {
    uint32_t qh = 0;
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 8; ++k)
        qh |= static_cast<uint32_t>((cb[4 * lane + j] >> k) & 1) << (4 * k + j);
    std::memcpy(blk.qh, &qh, 4);
    cb += 64;
  }
  for (int k = 0; k < 4; ++k) std::memcpy(blk.qs + 4 * k, cb + 64 * k + 4 * lane, 4);
  if constexpr (requires { blk.e; })
    blk.e = sc[lane];
  else
    std::memcpy(&blk.d, sc + 2 * lane, 2);
  if constexpr (requires { blk.m; }) std::memcpy(&blk.m, sc + 32 + 2 * lane, 2);
}

// fn(B{}) with B the block type of nibble type t.
template <class Fn>
void with_nibble_block(DType t, Fn&& fn) {
  switch (t) {
    case DType::Q4_0:
      return fn(BlockQ4_0{});
    case DType::Q4_1:
      return fn(BlockQ4_1{});
    case DType::Q5_0:
      return fn(BlockQ5_0{});
    case DType::IQ4_NL:
      return fn(BlockIQ4_NL{});
    case DType::MXFP4:
      return fn(BlockMXFP4{});
    default:
      return fn(BlockQ5_1{});
  }
}

// Q4_K: bytes per 256-element super-block per group (see the header); Q5_K
// puts its plane of fifth bits (kQ5KPlane bytes) first, then Q4_K's layout.
constexpr size_t kQ4KCodes = 2048, kQ4KScales = 128, kQ4KMins = 128, kQ4KSuper = 2368,
                 kQ5KPlane = 512, kQ5KSuper = 2880;

int64_t supers_of(int64_t n_in) {
  if (n_in <= 0 || n_in % QK_K != 0)
    throw Error("Rows16 layout: K-quant row length " + std::to_string(n_in) +
                " is not a positive multiple of 256");
  return n_in / QK_K;
}

// Super-block by super-block: put(sb, lane, block) writes each real row's
// block into the zeroed group bytes sb (padding rows stay zero: codes, scales
// and d 0).
template <class B, size_t kSuper, class Put>
void pack_supers(const uint8_t* const rows[kPackRows], int64_t nsb, uint8_t* dst, Put put) {
  for (int64_t s = 0; s < nsb; ++s) {
    uint8_t* sb = dst + static_cast<size_t>(s) * kSuper;
    std::memset(sb, 0, kSuper);
    for (int lane = 0; lane < kPackRows; ++lane) {
      if (!rows[lane]) continue;
      B blk;
      std::memcpy(&blk, rows[lane] + static_cast<size_t>(s) * sizeof blk, sizeof blk);
      put(sb, lane, blk);
    }
  }
}

// The inverse for one row: get(sb, lane, block) fills a zeroed block.
template <class B, size_t kSuper, class Get>
void unpack_supers(const uint8_t* group, int lane, int64_t nsb, B* dst, Get get) {
  for (int64_t s = 0; s < nsb; ++s) {
    std::memset(&dst[s], 0, sizeof(B));
    get(group + static_cast<size_t>(s) * kSuper, lane, dst[s]);
  }
}

// Q4_K or Q5_K (B), which share everything but Q5_K's fifth bits.
template <class B>
void put_k4(uint8_t* sb, int lane, const B& blk) {
  uint8_t* hb = sb;
  if constexpr (std::is_same_v<B, BlockQ5_K>) sb += kQ5KPlane;
  uint8_t* scales = sb + kQ4KCodes;
  uint8_t* mins = sb + kQ4KCodes + kQ4KScales;
  uint8_t* d = sb + kQ4KCodes + kQ4KScales + kQ4KMins;
  for (int c = 0; c < 4; ++c)
    for (int k = 0; k < 8; ++k)
      std::memcpy(sb + 512 * c + 64 * k + 4 * lane, blk.qs + 32 * c + 4 * k, 4);
  if constexpr (std::is_same_v<B, BlockQ5_K>)
    for (int k = 0; k < 8; ++k) std::memcpy(hb + 64 * k + 4 * lane, blk.qh + 4 * k, 4);
  for (int j = 0; j < 8; ++j) {
    int sc = 0, m = 0;
    pagellm::detail::unpack_scale_min_k4(blk.scales, j, &sc, &m);
    scales[16 * j + lane] = static_cast<uint8_t>(sc);
    mins[2 * (16 * (j / 2) + lane) + j % 2] = static_cast<uint8_t>(m);
  }
  std::memcpy(d + 2 * lane, &blk.d, 2);
  std::memcpy(d + 32 + 2 * lane, &blk.dmin, 2);
}

template <class B>
void get_k4(const uint8_t* sb, int lane, B& b) {
  const uint8_t* hb = sb;
  if constexpr (std::is_same_v<B, BlockQ5_K>) sb += kQ5KPlane;
  const uint8_t* scales = sb + kQ4KCodes;
  const uint8_t* mins = sb + kQ4KCodes + kQ4KScales;
  const uint8_t* d = sb + kQ4KCodes + kQ4KScales + kQ4KMins;
  for (int c = 0; c < 4; ++c)
    for (int k = 0; k < 8; ++k)
      std::memcpy(b.qs + 32 * c + 4 * k, sb + 512 * c + 64 * k + 4 * lane, 4);
  if constexpr (std::is_same_v<B, BlockQ5_K>)
    for (int k = 0; k < 8; ++k) std::memcpy(b.qh + 4 * k, hb + 64 * k + 4 * lane, 4);
  for (int j = 0; j < 8; ++j) {
    const int sc = scales[16 * j + lane], m = mins[2 * (16 * (j / 2) + lane) + j % 2];
    if (j < 4) {
      b.scales[j] |= static_cast<uint8_t>(sc & 63);
      b.scales[j + 4] |= static_cast<uint8_t>(m & 63);
    } else {
      b.scales[j + 4] |= static_cast<uint8_t>((sc & 15) | ((m & 15) << 4));
      b.scales[j - 4] |= static_cast<uint8_t>((sc >> 4) << 6);
      b.scales[j] |= static_cast<uint8_t>((m >> 4) << 6);
    }
  }
  std::memcpy(&b.d, d + 2 * lane, 2);
  std::memcpy(&b.dmin, d + 32 + 2 * lane, 2);
}

// Q6_K: bytes per super-block per group (see the header).
constexpr size_t kQ6KQh = 2048, kQ6KScales = 3072, kQ6KD = 3328, kQ6KSuper = 3360;

// The 6-bit code (0..63) of element e of a Q6_K block (tensor/blocks.h layout).
int q6k_code(const BlockQ6_K& b, int e) {
  const int half = e / 128, m = (e % 128) / 32, l = e % 32;
  const uint8_t ql = b.ql[64 * half + l + 32 * (m % 2)];
  const uint8_t qh = b.qh[32 * half + l];
  return ((m < 2 ? ql & 15 : ql >> 4)) | (((qh >> (2 * m)) & 3) << 4);
}

void set_q6k_code(BlockQ6_K& b, int e, int code) {
  const int half = e / 128, m = (e % 128) / 32, l = e % 32;
  uint8_t& ql = b.ql[64 * half + l + 32 * (m % 2)];
  uint8_t& qh = b.qh[32 * half + l];
  ql |= static_cast<uint8_t>(m < 2 ? (code & 15) : (code & 15) << 4);
  qh |= static_cast<uint8_t>(((code >> 4) & 3) << (2 * m));
}

void put_q6k(uint8_t* sb, int lane, const BlockQ6_K& blk) {
  for (int e = 0; e < QK_K; ++e) {
    const int code = q6k_code(blk, e), G = e / 4, i = e % 4;
    sb[64 * (G % 32) + 4 * lane + i] |= static_cast<uint8_t>((code & 15) << (4 * (G / 32)));
    sb[kQ6KQh + 64 * (G % 16) + 4 * lane + i] |=
        static_cast<uint8_t>((code >> 4) << (2 * (G / 16)));
  }
  for (int j = 0; j < 16; ++j) sb[kQ6KScales + 16 * j + lane] = static_cast<uint8_t>(blk.scales[j]);
  std::memcpy(sb + kQ6KD + 2 * lane, &blk.d, 2);
}

void get_q6k(const uint8_t* sb, int lane, BlockQ6_K& b) {
  for (int e = 0; e < QK_K; ++e) {
    const int G = e / 4, i = e % 4;
    const int lo = (sb[64 * (G % 32) + 4 * lane + i] >> (4 * (G / 32))) & 15;
    const int hi = (sb[kQ6KQh + 64 * (G % 16) + 4 * lane + i] >> (2 * (G / 16))) & 3;
    set_q6k_code(b, e, lo | (hi << 4));
  }
  for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<int8_t>(sb[kQ6KScales + 16 * j + lane]);
  std::memcpy(&b.d, sb + kQ6KD + 2 * lane, 2);
}

// Q2_K: bytes per super-block per group (see the header).
constexpr size_t kQ2KScales = 1024, kQ2KD = 1280, kQ2KSuper = 1344;

// Element e's 2-bit field in a Q2_K or Q3_K block's qs (tensor/blocks.h):
// byte 32 * (e / 128) + e % 32, bits 2 * ((e % 128) / 32).
int low2_code(const uint8_t* qs, int e) {
  return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}
void set_low2_code(uint8_t* qs, int e, int code) {
  qs[32 * (e / 128) + e % 32] |= static_cast<uint8_t>((code & 3) << (2 * ((e % 128) / 32)));
}

// Element e's code in group bytes sb (the 2-bit plane of Q2_K and Q3_K).
void put_plane2(uint8_t* sb, int lane, int e, int code) {
  const int G = e / 4, i = e % 4;
  sb[64 * (G % 16) + 4 * lane + i] |= static_cast<uint8_t>((code & 3) << (2 * (G / 16)));
}
int get_plane2(const uint8_t* sb, int lane, int e) {
  const int G = e / 4, i = e % 4;
  return (sb[64 * (G % 16) + 4 * lane + i] >> (2 * (G / 16))) & 3;
}

void put_q2k(uint8_t* sb, int lane, const BlockQ2_K& blk) {
  for (int e = 0; e < QK_K; ++e) put_plane2(sb, lane, e, low2_code(blk.qs, e));
  for (int j = 0; j < 16; ++j) sb[kQ2KScales + 16 * j + lane] = blk.scales[j];
  std::memcpy(sb + kQ2KD + 2 * lane, &blk.d, 2);
  std::memcpy(sb + kQ2KD + 32 + 2 * lane, &blk.dmin, 2);
}

void get_q2k(const uint8_t* sb, int lane, BlockQ2_K& b) {
  for (int e = 0; e < QK_K; ++e) set_low2_code(b.qs, e, get_plane2(sb, lane, e));
  for (int j = 0; j < 16; ++j) b.scales[j] = sb[kQ2KScales + 16 * j + lane];
  std::memcpy(&b.d, sb + kQ2KD + 2 * lane, 2);
  std::memcpy(&b.dmin, sb + kQ2KD + 32 + 2 * lane, 2);
}

// Q3_K: bytes per super-block per group (see the header).
constexpr size_t kQ3KHigh = 1024, kQ3KScales = 1536, kQ3KD = 1792, kQ3KSuper = 1824;

// The 3-bit code (0..7, value code - 4) of element e of a Q3_K block: its two
// low bits in qs, its high bit in hmask (tensor/blocks.h layout).
int q3k_code(const BlockQ3_K& b, int e) {
  const int half = e / 128, m = (e % 128) / 32;
  return low2_code(b.qs, e) | (((b.hmask[e % 32] >> (4 * half + m)) & 1) << 2);
}

void set_q3k_code(BlockQ3_K& b, int e, int code) {
  const int half = e / 128, m = (e % 128) / 32;
  set_low2_code(b.qs, e, code);
  b.hmask[e % 32] |= static_cast<uint8_t>(((code >> 2) & 1) << (4 * half + m));
}

// Inverse of detail::unpack_scale_q3_k: sub-block j's scale (-32..31) into the
// 12 packed bytes.
void set_q3k_scale(uint8_t* s, int j, int scale) {
  const int u = scale + 32, lo = u & 15, hi = u >> 4;
  if (j < 8)
    s[j] |= static_cast<uint8_t>(lo);
  else
    s[j - 8] |= static_cast<uint8_t>(lo << 4);
  s[8 + (j & 3)] |= static_cast<uint8_t>(hi << (2 * (j >> 2)));
}

void put_q3k(uint8_t* sb, int lane, const BlockQ3_K& blk) {
  for (int e = 0; e < QK_K; ++e) {
    const int code = q3k_code(blk, e), G = e / 4, i = e % 4;
    put_plane2(sb, lane, e, code);
    sb[kQ3KHigh + 64 * (G % 8) + 4 * lane + i] |= static_cast<uint8_t>((code >> 2) << (G / 8));
  }
  for (int j = 0; j < 16; ++j)
    sb[kQ3KScales + 16 * j + lane] =
        static_cast<uint8_t>(static_cast<int8_t>(detail::unpack_scale_q3_k(blk.scales, j)));
  std::memcpy(sb + kQ3KD + 2 * lane, &blk.d, 2);
}

void get_q3k(const uint8_t* sb, int lane, BlockQ3_K& b) {
  for (int e = 0; e < QK_K; ++e) {
    const int G = e / 4, i = e % 4;
    const int hi = (sb[kQ3KHigh + 64 * (G % 8) + 4 * lane + i] >> (G / 8)) & 1;
    set_q3k_code(b, e, get_plane2(sb, lane, e) | (hi << 2));
  }
  for (int j = 0; j < 16; ++j)
    set_q3k_scale(b.scales, j, static_cast<int8_t>(sb[kQ3KScales + 16 * j + lane]));
  std::memcpy(&b.d, sb + kQ3KD + 2 * lane, 2);
}

// IQ4_XS: bytes per super-block per group (see the header).
constexpr size_t kIq4XsScales = 2048, kIq4XsD = 2176, kIq4XsSuper = 2208;

void put_iq4xs(uint8_t* sb, int lane, const BlockIQ4_XS& blk) {
  for (int j = 0; j < 8; ++j) {
    for (int k = 0; k < 4; ++k)
      std::memcpy(sb + 256 * j + 64 * k + 4 * lane, blk.qs + 16 * j + 4 * k, 4);
    sb[kIq4XsScales + 16 * j + lane] = static_cast<uint8_t>(iq4_xs_scale(blk, j));
  }
  std::memcpy(sb + kIq4XsD + 2 * lane, &blk.d, 2);
}

void get_iq4xs(const uint8_t* sb, int lane, BlockIQ4_XS& b) {
  for (int j = 0; j < 8; ++j) {
    for (int k = 0; k < 4; ++k)
      std::memcpy(b.qs + 16 * j + 4 * k, sb + 256 * j + 64 * k + 4 * lane, 4);
    const int ls = static_cast<int8_t>(sb[kIq4XsScales + 16 * j + lane]) + 32;
    b.scales_l[j / 2] = static_cast<uint8_t>(b.scales_l[j / 2] | ((ls & 15) << (4 * (j % 2))));
    b.scales_h = static_cast<uint16_t>(b.scales_h | ((ls >> 4) << (2 * j)));
  }
  std::memcpy(&b.d, sb + kIq4XsD + 2 * lane, 2);
}

// Calls fn(block tag, super-block bytes, put, get) for K-quant type t.
template <class Fn>
void with_k_layout(DType t, Fn&& fn) {
  switch (t) {
    case DType::Q2_K:
      return fn(BlockQ2_K{}, std::integral_constant<size_t, kQ2KSuper>{}, put_q2k, get_q2k);
    case DType::Q3_K:
      return fn(BlockQ3_K{}, std::integral_constant<size_t, kQ3KSuper>{}, put_q3k, get_q3k);
    case DType::Q4_K:
      return fn(BlockQ4_K{}, std::integral_constant<size_t, kQ4KSuper>{}, put_k4<BlockQ4_K>,
                get_k4<BlockQ4_K>);
    case DType::Q5_K:
      return fn(BlockQ5_K{}, std::integral_constant<size_t, kQ5KSuper>{}, put_k4<BlockQ5_K>,
                get_k4<BlockQ5_K>);
    case DType::Q6_K:
      return fn(BlockQ6_K{}, std::integral_constant<size_t, kQ6KSuper>{}, put_q6k, get_q6k);
    case DType::IQ4_XS:
      return fn(BlockIQ4_XS{}, std::integral_constant<size_t, kIq4XsSuper>{}, put_iq4xs, get_iq4xs);
    default:
      throw Error(std::string("Rows16 layout: ") + dtype_name(t) + " is not a K-quant type");
  }
}

// The types of 256-element super-blocks (with_k_layout).
bool is_k_quant(DType t) {
  return t == DType::Q2_K || t == DType::Q3_K || t == DType::Q4_K || t == DType::Q5_K ||
         t == DType::Q6_K || t == DType::IQ4_XS;
}

int64_t blocks_of(int64_t n_in) {
  if (n_in <= 0 || n_in % 32 != 0)
    throw Error("Rows16 layout: row length " + std::to_string(n_in) +
                " is not a positive multiple of 32");
  return n_in / 32;
}

}  // namespace

static_assert(kPackRows == layout_rows(WeightLayout::Rows16));

bool packable(DType t) {
  return t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q5_0 || t == DType::Q5_1 ||
         t == DType::Q8_0 || t == DType::IQ4_NL || t == DType::Q2_K || t == DType::Q3_K ||
         t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K || t == DType::IQ4_XS ||
         t == DType::F16 || t == DType::BF16 || t == DType::MXFP4;
}

size_t packed_group_bytes(DType t, int64_t n_in) {
  if (t == DType::F16 || t == DType::BF16)
    return static_cast<size_t>(blocks_of(n_in)) * 64 * kPackRows;
  if (t == DType::Q4_K) return static_cast<size_t>(supers_of(n_in)) * kQ4KSuper;
  if (t == DType::Q5_K) return static_cast<size_t>(supers_of(n_in)) * kQ5KSuper;
  if (t == DType::Q6_K) return static_cast<size_t>(supers_of(n_in)) * kQ6KSuper;
  if (t == DType::Q3_K) return static_cast<size_t>(supers_of(n_in)) * kQ3KSuper;
  if (t == DType::Q2_K) return static_cast<size_t>(supers_of(n_in)) * kQ2KSuper;
  if (t == DType::IQ4_XS) return static_cast<size_t>(supers_of(n_in)) * kIq4XsSuper;
  const int64_t nb = blocks_of(n_in);
  const size_t S = scale_bytes(t);
  return static_cast<size_t>(nb) * (code_bytes(t) + S) + (nb % 2 ? S : 0);
}

size_t packed_bytes(DType t, int64_t n_in, int64_t n_out) {
  const int64_t groups = (n_out + kPackRows - 1) / kPackRows;
  return packed_group_bytes(t, n_in) * static_cast<size_t>(groups);
}

void pack_rows16(DType t, int64_t n_in, int64_t n_out, const void* src, size_t src_stride,
                 void* dst) {
  if (t == DType::F16 || t == DType::BF16) {
    const int64_t nb = blocks_of(n_in);
    const size_t gb = packed_group_bytes(t, n_in);
    for (int64_t g = 0; g * kPackRows < n_out; ++g) {
      uint8_t* group = static_cast<uint8_t*>(dst) + static_cast<size_t>(g) * gb;
      for (int lane = 0; lane < kPackRows; ++lane) {
        const int64_t r = g * kPackRows + lane;
        const auto* row = static_cast<const uint8_t*>(src) + static_cast<size_t>(r) * src_stride;
        for (int64_t b = 0; b < nb; ++b) {
          uint8_t* to = group + float_rows16_at(lane, b, nb);
          if (r < n_out)
            std::memcpy(to, row + 64 * b, 64);
          else
            std::memset(to, 0, 64);  // +0.0 in f16 and bf16
        }
      }
    }
    return;
  }
  if (is_k_quant(t)) {
    const int64_t nsb = supers_of(n_in);
    const size_t gb = packed_group_bytes(t, n_in);
    for (int64_t g = 0; g * kPackRows < n_out; ++g) {
      const uint8_t* rows[kPackRows];
      for (int lane = 0; lane < kPackRows; ++lane) {
        const int64_t r = g * kPackRows + lane;
        rows[lane] = r < n_out
                         ? static_cast<const uint8_t*>(src) + static_cast<size_t>(r) * src_stride
                         : nullptr;
      }
      uint8_t* gdst = static_cast<uint8_t*>(dst) + static_cast<size_t>(g) * gb;
      with_k_layout(t, [&](auto blk, auto super, auto put, auto) {
        pack_supers<decltype(blk), super()>(rows, nsb, gdst, put);
      });
    }
    return;
  }
  const size_t C = code_bytes(t), S = scale_bytes(t);
  const int64_t nb = blocks_of(n_in);
  const size_t gbytes = packed_group_bytes(t, n_in);
  const int64_t groups = (n_out + kPackRows - 1) / kPackRows;
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  for (int64_t g = 0; g < groups; ++g) {
    uint8_t* group = d + static_cast<size_t>(g) * gbytes;
    std::memset(group, 0, gbytes);  // the padding of an odd last pair
    for (int lane = 0; lane < kPackRows; ++lane) {
      const int64_t r = g * kPackRows + lane;
      const uint8_t* row = r < n_out ? s + static_cast<size_t>(r) * src_stride : nullptr;
      for (int64_t b = 0; b < nb; ++b) {
        uint8_t* cb = group + rows16_codes_at(b, C, S);
        uint8_t* sc = group + rows16_scales_at(b, nb, C, S);
        if (t == DType::Q8_0) {
          uint8_t qs[32];
          std::memset(qs, 0x80, sizeof qs);  // padding rows: code 128 = value 0
          f16_t scale = 0;
          if (row) {
            const uint8_t* blk = row + static_cast<size_t>(b) * sizeof(BlockQ8_0);
            for (int j = 0; j < 32; ++j)
              qs[j] = static_cast<uint8_t>(blk[offsetof(BlockQ8_0, qs) + j] + 128);
            std::memcpy(&scale, blk + offsetof(BlockQ8_0, d), 2);
          }
          for (int k = 0; k < 8; ++k) std::memcpy(cb + 64 * k + 4 * lane, qs + 4 * k, 4);
          std::memcpy(sc + 2 * lane, &scale, 2);
          continue;
        }
        with_nibble_block(t, [&](auto blk) {  // padding rows: codes, d and m 0
          // byte offsets: rows need not be aligned
          if (row) std::memcpy(&blk, row + static_cast<size_t>(b) * sizeof blk, sizeof blk);
          put_nibbles(cb, sc, lane, blk);
        });
      }
    }
  }
}

void unpack_row16(DType t, int64_t n_in, const void* packed, int64_t r, void* dst) {
  if (t == DType::F16 || t == DType::BF16) {
    const uint8_t* group = static_cast<const uint8_t*>(packed) +
                           static_cast<size_t>(r / kPackRows) * packed_group_bytes(t, n_in);
    const int64_t nb = blocks_of(n_in);
    for (int64_t b = 0; b < nb; ++b)
      std::memcpy(static_cast<uint8_t*>(dst) + 64 * b,
                  group + float_rows16_at(static_cast<int>(r % kPackRows), b, nb), 64);
    return;
  }
  if (is_k_quant(t)) {
    const uint8_t* group = static_cast<const uint8_t*>(packed) +
                           static_cast<size_t>(r / kPackRows) * packed_group_bytes(t, n_in);
    return with_k_layout(t, [&](auto blk, auto super, auto, auto get) {
      using B = decltype(blk);
      unpack_supers<B, super()>(group, static_cast<int>(r % kPackRows), supers_of(n_in),
                                static_cast<B*>(dst), get);
    });
  }
  const size_t C = code_bytes(t), S = scale_bytes(t);
  const int64_t nb = blocks_of(n_in);
  const int64_t g = r / kPackRows;
  const int lane = static_cast<int>(r % kPackRows);
  const auto* group =
      static_cast<const uint8_t*>(packed) + static_cast<size_t>(g) * packed_group_bytes(t, n_in);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* cb = group + rows16_codes_at(b, C, S);
    const uint8_t* sc = group + rows16_scales_at(b, nb, C, S);
    if (t == DType::Q8_0) {
      uint8_t* blk = static_cast<uint8_t*>(dst) + static_cast<size_t>(b) * sizeof(BlockQ8_0);
      std::memcpy(blk + offsetof(BlockQ8_0, d), sc + 2 * lane, 2);
      for (int k = 0; k < 8; ++k)
        for (int j = 0; j < 4; ++j)
          blk[offsetof(BlockQ8_0, qs) + 4 * k + j] =
              static_cast<uint8_t>(cb[64 * k + 4 * lane + j] - 128);
      continue;
    }
    with_nibble_block(t, [&](auto blk) {
      get_nibbles(cb, sc, lane, blk);
      std::memcpy(static_cast<uint8_t*>(dst) + static_cast<size_t>(b) * sizeof blk, &blk,
                  sizeof blk);
    });
  }
}

}  // namespace pagellm::cpu
