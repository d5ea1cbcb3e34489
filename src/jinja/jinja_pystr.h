// Python `str` semantics over UTF-8 strings, as the Jinja engine needs them:
// lengths, indexes and slices count code points; whitespace is Python's
// (str.isspace: ASCII \t\n\v\f\r and \x1c-\x1f, space, \x85, \xa0, and the
// Unicode space separators); lower() uses Unicode's full lowercase mapping
// (unicode_data.h); upper(), title() and the case tests cover ASCII, Latin-1,
// Latin Extended-A, Greek, Cyrillic and fullwidth Latin (other scripts are
// left as they are). Bytes that are not valid UTF-8 survive a decode/encode
// round trip (as U+DC80..U+DCFF, like Python's surrogateescape).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pagellm::jinja::py {

std::u32string decode(std::string_view s);
std::string encode(std::u32string_view s);
void append_utf8(std::string& out, char32_t c);
// The code point starting at byte `i` and its length in bytes; a byte that does
// not start valid UTF-8 reads as U+DC00+byte, 1 byte long.
char32_t decode_at(std::string_view s, size_t i, size_t* len);
// Number of code points.
size_t length(std::string_view s);

bool is_space(char32_t c);
bool is_digit(char32_t c);  // ASCII digits
bool is_alpha(char32_t c);  // letters the case tables know, and CJK/other letters >= U+00AA
char32_t to_upper(char32_t c);
char32_t to_lower(char32_t c);
bool is_cased(char32_t c);

// str.strip / lstrip / rstrip; `chars` nullopt: whitespace.
std::string strip(std::string_view s, std::optional<std::string_view> chars, bool left, bool right);
// str.split / rsplit; `sep` nullopt: runs of whitespace. maxsplit < 0: no limit.
// An empty `sep` throws std::invalid_argument("empty separator").
std::vector<std::string> split(std::string_view s, std::optional<std::string_view> sep,
                               int64_t maxsplit = -1);
std::vector<std::string> rsplit(std::string_view s, std::optional<std::string_view> sep,
                                int64_t maxsplit = -1);
// str.splitlines: \n, \r, \r\n, \v, \f, \x1c-\x1e, \x85, \u2028, \u2029.
std::vector<std::string> splitlines(std::string_view s, bool keepends = false);
// str.replace; count < 0: all.
std::string replace(std::string_view s, std::string_view old, std::string_view repl,
                    int64_t count = -1);
// The size replace() returns, without building it (to refuse a too-large result first).
size_t replaced_size(std::string_view s, std::string_view old, std::string_view repl,
                     int64_t count = -1);

std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string capitalize(std::string_view s);  // first upper, rest lower
std::string title(std::string_view s);       // str.title
std::string swapcase(std::string_view s);

// Python slice semantics on code points (step != 0).
std::string slice(std::string_view s, std::optional<int64_t> start, std::optional<int64_t> stop,
                  int64_t step);
// Resolves a Python slice for a sequence of `n` items into the indexes taken.
std::vector<int64_t> slice_indices(int64_t n, std::optional<int64_t> start,
                                   std::optional<int64_t> stop, int64_t step);

// int(f) for a float: truncated toward zero; throws std::out_of_range when f is
// not finite or beyond 64 bits.
int64_t float_to_int(double f);

// repr(float): shortest round-trip digits, "1.0", "1e+16", "1.5e-05", "inf", "nan".
std::string float_repr(double v);
// repr(str): single quotes unless the text holds ' and no ", escapes as Python.
std::string str_repr(std::string_view s);

}  // namespace pagellm::jinja::py
