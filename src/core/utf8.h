// UTF-8 checks for text that comes from a model file and goes to a user (names,
// attributes, metadata, paths): the loader refuses what Python could not decode, and
// messages quote such text with its bad bytes escaped.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace octet {

// The offset of the first byte of `text` that does not begin a valid UTF-8 sequence, by
// the rules of Python's strict decoder (no overlong forms, no surrogates U+D800..U+DFFF,
// nothing above U+10FFFF), or std::string_view::npos when all of it is valid.
size_t InvalidUtf8Offset(std::string_view text);

// `text` with each byte that is not part of a valid UTF-8 sequence written as \xNN, so
// that a message quoting it is valid UTF-8.
std::string EscapeInvalidUtf8(std::string_view text);

}  // namespace octet
