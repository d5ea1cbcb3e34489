// JSON Schema formats date, time and date-time as grammars: over sweeps of
// candidate strings (every year's February 28/29/30, every month/day pair
// of edge years, hour/minute/second/fraction/offset grids, and one-character
// mutations of valid strings) the grammar takes exactly what a naive
// RFC 3339 checker written here takes. The checker follows python
// jsonschema's 2020-12 checkers (rfc3339-validator and date.fromisoformat):
// year 0000 and second 60 refused, the offset required, `t`/`z` accepted.
// tests/server/test_structured_output.py validates generated strings with
// jsonschema itself.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar_matcher.h"
#include "grammar/json_schema.h"

namespace pagellm {
namespace {

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

int number(std::string_view s) {
  int v = 0;
  for (char c : s) v = v * 10 + (c - '0');
  return v;
}

bool leap(int y) { return y % 4 == 0 && (y % 100 != 0 || y % 400 == 0); }

bool ref_date(std::string_view s) {
  if (s.size() != 10 || s[4] != '-' || s[7] != '-') return false;
  if (!all_digits(s.substr(0, 4)) || !all_digits(s.substr(5, 2)) || !all_digits(s.substr(8, 2)))
    return false;
  const int y = number(s.substr(0, 4)), m = number(s.substr(5, 2)), d = number(s.substr(8, 2));
  if (y == 0 || m < 1 || m > 12) return false;
  static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return d >= 1 && d <= kDays[m - 1] + (m == 2 && leap(y) ? 1 : 0);
}

// hh:mm with hh <= 23, mm <= 59.
bool ref_hh_mm(std::string_view s) {
  return s.size() == 5 && s[2] == ':' && all_digits(s.substr(0, 2)) &&
         all_digits(s.substr(3, 2)) && number(s.substr(0, 2)) <= 23 && number(s.substr(3, 2)) <= 59;
}

bool ref_time(std::string_view s) {
  if (s.size() < 8 || !ref_hh_mm(s.substr(0, 5)) || s[5] != ':' || !all_digits(s.substr(6, 2)) ||
      number(s.substr(6, 2)) > 59)
    return false;
  size_t i = 8;
  if (i < s.size() && s[i] == '.') {
    size_t j = i + 1;
    while (j < s.size() && s[j] >= '0' && s[j] <= '9') ++j;
    if (j == i + 1) return false;
    i = j;
  }
  const std::string_view offset = s.substr(i);
  if (offset == "Z" || offset == "z") return true;
  return offset.size() == 6 && (offset[0] == '+' || offset[0] == '-') && ref_hh_mm(offset.substr(1));
}

bool ref_date_time(std::string_view s) {
  return s.size() > 11 && (s[10] == 'T' || s[10] == 't') && ref_date(s.substr(0, 10)) &&
         ref_time(s.substr(11));
}

std::shared_ptr<const Grammar> format_grammar(const char* format) {
  return Grammar::parse(json_schema_to_gbnf({{"type", "string"}, {"format", format}}));
}

// Every candidate: the grammar (on the JSON string) agrees with `ref`;
// returns how many were valid, so a sweep can show it hit both sides.
template <class Ref>
size_t check_all(const char* format, const std::vector<std::string>& cands, Ref ref) {
  const auto g = format_grammar(format);
  size_t valid = 0;
  for (const auto& c : cands) {
    const bool want = ref(c);
    valid += want;
    EXPECT_EQ(grammar_accepts(g, "\"" + c + "\""), want) << format << ": " << c;
    if (::testing::Test::HasFailure()) break;  // one report, not thousands
  }
  return valid;
}

std::string two(int v) { return (v < 10 ? "0" : "") + std::to_string(v); }
std::string four(int v) {
  std::string s = std::to_string(v);
  return std::string(4 - s.size(), '0') + s;
}

std::vector<std::string> date_candidates(std::mt19937& rng) {
  std::vector<std::string> out;
  for (int y = 0; y <= 9999; ++y)  // the leap-year rule over every year
    for (const char* md : {"-02-28", "-02-29", "-02-30", "-03-01"}) out.push_back(four(y) + md);
  std::vector<int> years = {0, 1, 3, 4, 96, 100, 104, 400, 1600, 1700, 1900, 2000, 2023, 2024, 2100, 9999};
  for (int i = 0; i < 10; ++i) years.push_back(static_cast<int>(rng() % 10000));
  for (int y : years)
    for (int m = 0; m <= 13; ++m)
      for (int d = 0; d <= 32; ++d) out.push_back(four(y) + "-" + two(m) + "-" + two(d));
  for (const char* bad : {"2024-2-29", "24-02-29", "2024-02-029", "2024/02/29", "2024-02-29 ",
                          "+2024-02-29", "2024-02-2a", "", "20240229"})
    out.push_back(bad);
  return out;
}

std::vector<std::string> time_candidates() {
  std::vector<std::string> out;
  for (int h = 0; h <= 25; ++h)
    for (int m : {0, 7, 59, 60})
      for (int s : {0, 30, 59, 60, 61})
        for (const char* frac : {"", ".", ".0", ".123456789123"})
          for (const char* off : {"", "Z", "z", "+00:00", "-23:59", "+24:00", "+12:60", "+1:00",
                                  "-05:30", "UTC", "Zz", "+05"})
            out.push_back(two(h) + ":" + two(m) + ":" + two(s) + frac + off);
  for (const char* bad : {"1:02:03Z", "01:02Z", "01:02:03.Z", "01:02:03.5.5Z", "T01:02:03Z", ""})
    out.push_back(bad);
  return out;
}

// Copies of `valid` with one character replaced, inserted or removed.
std::vector<std::string> mutations(const std::vector<std::string>& valid, size_t n, std::mt19937& rng) {
  const std::string alphabet = "0123456789-:.TtZz+ a";
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) {
    std::string s = valid[rng() % valid.size()];
    const size_t at = rng() % (s.size() + 1);
    const char c = alphabet[rng() % alphabet.size()];
    switch (rng() % 3) {
      case 0:
        if (at < s.size()) s[at] = c;
        break;
      case 1:
        s.insert(s.begin() + static_cast<std::ptrdiff_t>(at), c);
        break;
      default:
        if (at < s.size()) s.erase(at, 1);
    }
    out.push_back(s);
  }
  return out;
}

template <class Ref>
std::vector<std::string> valid_of(const std::vector<std::string>& cands, Ref ref) {
  std::vector<std::string> out;
  for (const auto& c : cands)
    if (ref(c)) out.push_back(c);
  return out;
}

TEST(Rfc3339Format, DateGrammarIsExact) {
  std::mt19937 rng(1);
  const auto cands = date_candidates(rng);
  const size_t valid = check_all("date", cands, ref_date);
  EXPECT_GT(valid, 10000u);
  EXPECT_LT(valid, cands.size() - 10000);
  const auto muts = mutations(valid_of(cands, ref_date), 20000, rng);
  check_all("date", muts, ref_date);
}

TEST(Rfc3339Format, TimeGrammarIsExactAndNeedsAnOffset) {
  std::mt19937 rng(2);
  const auto cands = time_candidates();
  const size_t valid = check_all("time", cands, ref_time);
  EXPECT_GT(valid, 1000u);
  EXPECT_LT(valid, cands.size() - 1000);
  check_all("time", mutations(valid_of(cands, ref_time), 20000, rng), ref_time);
}

TEST(Rfc3339Format, DateTimeGrammarIsExact) {
  std::mt19937 rng(3);
  const auto dates = date_candidates(rng), times = time_candidates();
  const auto good_dates = valid_of(dates, ref_date), good_times = valid_of(times, ref_time);
  std::vector<std::string> cands = {"1000-10-10T00:00:00", "1000-19-39T00:00:00Z",
                                    "2024-02-29t23:59:59.5z", "2023-02-29T00:00:00Z"};
  const char* seps[] = {"T", "t", " ", "_", ""};
  for (int i = 0; i < 30000; ++i) {
    // Mostly valid halves, so that the separator and the pairing are what varies.
    const auto& d = rng() % 4 ? good_dates[rng() % good_dates.size()] : dates[rng() % dates.size()];
    const auto& t = rng() % 4 ? good_times[rng() % good_times.size()] : times[rng() % times.size()];
    cands.push_back(d + seps[rng() % 5] + t);
  }
  const size_t valid = check_all("date-time", cands, ref_date_time);
  EXPECT_GT(valid, 5000u);
  EXPECT_LT(valid, cands.size() - 5000);
  check_all("date-time", mutations(valid_of(cands, ref_date_time), 30000, rng), ref_date_time);
  // The example: no offset, so not a date-time.
  EXPECT_FALSE(ref_date_time("1000-10-10T00:00:00"));
}

}  // namespace
}  // namespace pagellm
