// Names of an enum's values from a table, for enums numbered 0, 1, 2, ...
#pragma once

#include <array>
#include <cstddef>
#include <type_traits>

namespace pagellm {

// names[i] names the enumerator of value i. A value outside the table (a
// number read from a file and cast to the enum) gives `fallback`.
template <class E, size_t N>
constexpr const char* enum_name(E e, const std::array<const char*, N>& names,
                                const char* fallback = "?") {
  // Unsigned, so a negative value lands past the end and takes the fallback.
  const auto i = static_cast<std::make_unsigned_t<std::underlying_type_t<E>>>(e);
  return i < N ? names[i] : fallback;
}

// The table's size matches an enum whose last enumerator is `last`.
template <class E, size_t N>
constexpr bool names_cover(E last, const std::array<const char*, N>&) {
  return static_cast<size_t>(last) + 1 == N;
}

}  // namespace pagellm
