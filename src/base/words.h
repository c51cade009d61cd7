#pragma once
// The vocabulary of a word-valued setting, declared once beside the enum it names: reading a
// value, naming one, and the list of words that messages and the settings table give all
// come from the one table, so that they cannot drift apart.
//
//   inline constexpr Words<BindMode, 3> kBindWords{{{
//       {BindMode::kNone, "none"}, {BindMode::kCore, "core"}, {BindMode::kNuma, "numa"}}}};
//
// The first word is the default: an empty value reads as it.

#include <array>
#include <cstddef>
#include <string>

#include "chorus/status.h"

namespace chorus {

template <class T, std::size_t N>
struct Words {
  struct Word {
    T value;
    const char* word;
  };
  std::array<Word, N> words;

  /// `value` of `variable` (for the message): its word's value, the first word's when empty.
  StatusOr<T> parse(const std::string& value, const std::string& variable) const {
    if (value.empty()) return words[0].value;
    for (const Word& w : words) {
      if (value == w.word) return w.value;
    }
    return invalid_argument(variable + "='" + value + "' is invalid: expected " + accepted());
  }
  /// The word of `value`; "?" for a value outside the table.
  const char* name(T value) const {
    for (const Word& w : words) {
      if (w.value == value) return w.word;
    }
    return "?";
  }
  /// "none, core or numa".
  std::string accepted() const {
    std::string out;
    for (std::size_t i = 0; i < N; ++i) {
      if (i > 0) out += i + 1 == N ? " or " : ", ";
      out += words[i].word;
    }
    return out;
  }
};

}  // namespace chorus
