// A regular expression over UTF-8 text with Unicode semantics, compiled by
// PCRE2 (Perl-compatible syntax) with these options:
//   PCRE2_UTF             the pattern and the subject are UTF-8; `.` and
//                         classes match whole characters
//   PCRE2_UCP             \s \w \d \b and POSIX classes follow Unicode
//                         properties (so \s matches U+3000, \d matches "٣")
//   PCRE2_DOLLAR_ENDONLY  `$` matches only at the very end of the subject,
//                         not before a final newline
// \p{L}, \p{N}, \p{P}, \p{Lu}, ... are Unicode general categories. Patterns
// are JIT-compiled where PCRE2 supports it.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace pagellm {

class UnicodeRegex {
 public:
  // Throws ConfigError with PCRE2's message and the offset for a bad pattern.
  explicit UnicodeRegex(std::string_view pattern);
  ~UnicodeRegex();
  UnicodeRegex(UnicodeRegex&&) noexcept;
  UnicodeRegex& operator=(UnicodeRegex&&) noexcept;

  const std::string& pattern() const { return pattern_; }

  // Calls on_match(begin, end) (byte offsets into `text`) for each successive
  // non-overlapping, non-empty match, left to right; empty matches are
  // skipped. `text` must be well-formed UTF-8 (not checked). Safe to call
  // from several threads at once. Throws Error if PCRE2 gives up (match limit).
  void for_each_match(std::string_view text,
                      const std::function<void(size_t, size_t)>& on_match) const;

 private:
  struct Code;
  std::string pattern_;
  std::unique_ptr<Code> code_;
};

}  // namespace pagellm
