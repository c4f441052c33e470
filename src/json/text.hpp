// text.hpp — JSON text out, and the UTF-8 check: the one string writer of
// uvcl (messages, `uvcl devices --json`, traces, job results, the HTTP
// server's answers) and the one well-formedness rule (the same as simdjson's:
// no overlong forms, no surrogates, nothing past U+10FFFF). No simdjson here.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace uvcl::json {

// Length of the well-formed UTF-8 sequence that starts at s[i]: 1 for an
// ASCII byte, 2-4 for a multi-byte sequence, 0 where the bytes there are not
// one (a stray continuation byte, an overlong form, a surrogate, a sequence
// cut short by the end of `s`). Requires i < s.size().
std::size_t utf8_length(std::string_view s, std::size_t i) noexcept;

// Offset of the first byte of `s` that does not start a well-formed UTF-8
// sequence; nullopt when `s` is valid UTF-8.
std::optional<std::size_t> first_invalid_utf8(std::string_view s) noexcept;

// Appends `s` as a JSON string literal: quotes, `"` and `\` escaped, control
// characters as \n, \r, \t, \b, \f or \u00XX, and every byte that is not part
// of a well-formed UTF-8 sequence replaced by U+FFFD, so the result is valid
// JSON whatever `s` holds (driver strings, file names, client input).
void append_string(std::string& out, std::string_view s);

// The same, as a new string: `quote("a\"b")` is `"a\"b"` with its quotes.
std::string quote(std::string_view s);

}  // namespace uvcl::json
