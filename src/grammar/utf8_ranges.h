// Code point ranges as UTF-8 byte-range sequences, so that a grammar over
// Unicode characters runs as an automaton over bytes: [U+00E0-U+00FF] is the
// one sequence [C3][A0-BF]; a range crossing encoding lengths or lead bytes
// becomes several sequences.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace pagellm {

using CodePointRanges = std::vector<std::pair<uint32_t, uint32_t>>;  // inclusive
using ByteRangeSeq = std::vector<std::pair<uint8_t, uint8_t>>;       // inclusive, per byte

// Sorted, merged, without the surrogates U+D800-U+DFFF (which UTF-8 cannot hold).
CodePointRanges normalize_code_points(CodePointRanges ranges);
// Every code point U+0000-U+10FFFF (surrogates excluded) not in `ranges`.
CodePointRanges complement_code_points(const CodePointRanges& ranges);

// Byte-range sequences whose matches are exactly the UTF-8 encodings of the
// code points in `ranges` (normalized).
std::vector<ByteRangeSeq> utf8_byte_sequences(const CodePointRanges& ranges);

}  // namespace pagellm
