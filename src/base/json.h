#pragma once
// JSON text that strict parsers accept, for the files Chorus writes (the timeline, the
// flight records).

#include <string>
#include <string_view>

namespace chorus {

/// Appends `s` as a JSON string literal. Names come from users, so anything goes: quotes,
/// backslashes and control characters are escaped, and bytes that are not UTF-8 become
/// U+FFFD (a strict parser rejects the whole file otherwise).
void append_json_string(std::string& out, std::string_view s);

}  // namespace chorus
