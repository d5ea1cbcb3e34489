#include "util/unicode_data.h"

#include <algorithm>

namespace pagellm {

namespace {

struct ClassRange {
  uint32_t first, last, cls;
};
struct LowerRun {
  uint32_t first, last, step;
  int32_t delta;
};
struct Decomposition {
  uint32_t cp, first, second;
};

#include "util/unicode_tables.inc"

// Hangul syllable decomposition constants (Unicode 3.12).
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount,
                   kSCount = kLCount * kNCount;

}  // namespace

CharClass char_class(char32_t cp) {
  const auto* end = std::end(kClassRanges);
  const auto* it = std::upper_bound(std::begin(kClassRanges), end, static_cast<uint32_t>(cp),
                                    [](uint32_t c, const ClassRange& r) { return c < r.first; });
  if (it == std::begin(kClassRanges)) return CharClass::kOther;
  --it;
  return cp <= it->last ? static_cast<CharClass>(it->cls) : CharClass::kOther;
}

void append_nfd(char32_t cp, std::u32string& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const uint32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out.push_back(kTBase + s % kTCount);
    return;
  }
  const auto* end = std::end(kDecompose);
  const auto* it = std::lower_bound(std::begin(kDecompose), end, static_cast<uint32_t>(cp),
                                    [](const Decomposition& d, uint32_t c) { return d.cp < c; });
  if (it == end || it->cp != cp) {
    out.push_back(cp);
    return;
  }
  append_nfd(it->first, out);  // decompositions nest (at most 4 code points in all)
  if (it->second != 0) append_nfd(it->second, out);
}

void append_lower(char32_t cp, std::u32string& out) {
  if (cp == 0x130) {  // LATIN CAPITAL LETTER I WITH DOT ABOVE
    out.push_back(U'i');
    out.push_back(0x307);
    return;
  }
  const auto* end = std::end(kLowerRuns);
  const auto* it = std::upper_bound(std::begin(kLowerRuns), end, static_cast<uint32_t>(cp),
                                    [](uint32_t c, const LowerRun& r) { return c < r.first; });
  if (it != std::begin(kLowerRuns)) {
    --it;
    if (cp <= it->last && (cp - it->first) % it->step == 0) {
      out.push_back(static_cast<char32_t>(static_cast<int32_t>(cp) + it->delta));
      return;
    }
  }
  out.push_back(cp);
}

}  // namespace pagellm
