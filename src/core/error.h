// One exception type for every user-facing failure: bad model, bad input,
// unsupported operator. Messages are one line and name what is wrong.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace octet {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

namespace detail {
template <typename... Args>
std::string Concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

// Throws octet::Error with the streamed message parts concatenated.
template <typename... Args>
[[noreturn]] void Fail(const Args&... args) {
  throw Error(detail::Concat(args...));
}

}  // namespace octet

// OCTET_CHECK(cond, parts...) throws octet::Error(parts...) when cond is false.
#define OCTET_CHECK(cond, ...)          \
  do {                                  \
    if (!(cond)) ::octet::Fail(__VA_ARGS__); \
  } while (0)
