#include "tokenizer/unicode_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <fmt/format.h>
#include <pcre2.h>

#include "tokenizer/utf8.h"
#include "util/error.h"

namespace pagellm {

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  const int n = pcre2_get_error_message(code, buf, sizeof(buf));
  return n < 0 ? fmt::format("PCRE2 error {}", code) : std::string(reinterpret_cast<char*>(buf));
}

// Per-thread match state: match data, and a JIT stack bigger than PCRE2's
// 32 KiB default so that long runs of text never exhaust it.
struct MatchState {
  static constexpr uint32_t kPairs = 32;
  static constexpr size_t kJitStackMax = 1 << 20;
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;

  MatchState() {
    data = pcre2_match_data_create(kPairs, nullptr);
    context = pcre2_match_context_create(nullptr);
    jit_stack = pcre2_jit_stack_create(32 * 1024, kJitStackMax, nullptr);
    if (data == nullptr || context == nullptr) throw std::bad_alloc();
    if (jit_stack != nullptr) pcre2_jit_stack_assign(context, nullptr, jit_stack);
  }
  ~MatchState() {
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
  MatchState(const MatchState&) = delete;
  MatchState& operator=(const MatchState&) = delete;
};

MatchState& match_state() {
  thread_local MatchState state;
  return state;
}

}  // namespace

struct UnicodeRegex::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

UnicodeRegex::UnicodeRegex(std::string_view pattern)
    : pattern_(pattern), code_(std::make_unique<Code>()) {
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  code_->code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern_.data()), pattern_.size(),
                    PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &err, &err_offset, nullptr);
  if (code_->code == nullptr) {
    throw ConfigError(fmt::format("bad regular expression '{}' at offset {}: {}", pattern_,
                                  err_offset, pcre2_message(err)));
  }
  // Without JIT support PCRE2 interprets the pattern; results are the same.
  (void)pcre2_jit_compile(code_->code, PCRE2_JIT_COMPLETE);
}

UnicodeRegex::~UnicodeRegex() = default;
UnicodeRegex::UnicodeRegex(UnicodeRegex&&) noexcept = default;
UnicodeRegex& UnicodeRegex::operator=(UnicodeRegex&&) noexcept = default;

void UnicodeRegex::for_each_match(std::string_view text,
                                  const std::function<void(size_t, size_t)>& on_match) const {
  MatchState& st = match_state();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos < text.size()) {
    const int rc = pcre2_match(code_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, st.data,
                               st.context);
    if (rc == PCRE2_ERROR_NOMATCH) return;
    // rc == 0: more capture groups than ovector pairs; the whole match is still set.
    if (rc < 0) {
      throw Error(fmt::format("regular expression '{}' failed: {}", pattern_, pcre2_message(rc)));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.data);
    const size_t begin = ov[0], end = ov[1];
    if (end > begin) {
      on_match(begin, end);
      pos = end;
    } else {  // an empty match: look again one character further on
      if (begin >= text.size()) return;
      pos = begin +
            std::min(utf8_lead_length(static_cast<uint8_t>(text[begin])), text.size() - begin);
    }
  }
}

}  // namespace pagellm
