#pragma once
// JSON text that strict parsers accept, for the files Chorus writes (the timeline, the
// flight records).

#include <cstddef>
#include <string>
#include <string_view>

namespace chorus {

/// Appends `s` as a JSON string literal. Names come from users, so anything goes: quotes,
/// backslashes and control characters are escaped, and bytes that are not UTF-8 become
/// U+FFFD (a strict parser rejects the whole file otherwise).
void append_json_string(std::string& out, std::string_view s);

/// Length of the well-formed UTF-8 sequence (RFC 3629: no overlong forms, no surrogates,
/// nothing past U+10FFFF) that starts at s[i], whose first byte is >= 0x80; 0 if none does.
/// The rule append_json_string writes by, and the JSON reader (base/json_value.h) reads by.
std::size_t utf8_sequence_length(std::string_view s, std::size_t i);

}  // namespace chorus
