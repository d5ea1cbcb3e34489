#include "grammar/utf8_ranges.h"

#include <algorithm>

#include "util/strings.h"

namespace pagellm {

CodePointRanges normalize_code_points(CodePointRanges ranges) {
  std::sort(ranges.begin(), ranges.end());
  CodePointRanges merged;
  for (auto [lo, hi] : ranges) {
    if (!merged.empty() && lo <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, hi);
    } else {
      merged.emplace_back(lo, hi);
    }
  }
  CodePointRanges out;
  for (auto [lo, hi] : merged) {  // cut out the surrogates
    if (hi < 0xD800 || lo > 0xDFFF) {
      out.emplace_back(lo, hi);
      continue;
    }
    if (lo < 0xD800) out.emplace_back(lo, 0xD7FF);
    if (hi > 0xDFFF) out.emplace_back(0xE000, hi);
  }
  return out;
}

CodePointRanges complement_code_points(const CodePointRanges& ranges) {
  const CodePointRanges in = normalize_code_points(ranges);
  CodePointRanges out;
  uint32_t next = 0;
  for (auto [lo, hi] : in) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= 0x10FFFF) out.emplace_back(next, 0x10FFFF);
  return normalize_code_points(out);
}

namespace {

int encoded_length(uint32_t cp) {
  return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

// lo..hi of one encoded length: split until every byte position is a plain
// range (the lower positions of lo all 0x80 and of hi all 0xBF where a higher
// position differs).
void split(uint32_t lo, uint32_t hi, std::vector<ByteRangeSeq>& out) {
  const int n = encoded_length(lo);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (uint32_t{1} << (6 * i)) - 1;
    if ((lo & ~m) == (hi & ~m)) continue;
    if ((lo & m) != 0) {
      split(lo, lo | m, out);
      split((lo | m) + 1, hi, out);
      return;
    }
    if ((hi & m) != m) {
      split(lo, (hi & ~m) - 1, out);
      split(hi & ~m, hi, out);
      return;
    }
  }
  std::string a, b;
  utf8_append(lo, a);
  utf8_append(hi, b);
  ByteRangeSeq seq;
  for (size_t k = 0; k < a.size(); ++k)
    seq.emplace_back(static_cast<uint8_t>(a[k]), static_cast<uint8_t>(b[k]));
  out.push_back(std::move(seq));
}

}  // namespace

std::vector<ByteRangeSeq> utf8_byte_sequences(const CodePointRanges& ranges) {
  std::vector<ByteRangeSeq> out;
  static const uint32_t kBounds[] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
  for (auto [lo, hi] : normalize_code_points(ranges)) {
    uint32_t start = lo;
    for (uint32_t bound : kBounds) {
      if (start > hi) break;
      if (start > bound) continue;
      const uint32_t end = std::min(hi, bound);
      split(start, end, out);
      start = end + 1;
    }
  }
  return out;
}

}  // namespace pagellm
