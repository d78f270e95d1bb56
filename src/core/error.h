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

// A failure octet detected in itself: a bug, not bad input. Its message starts with
// "internal: "; the fuzz targets count one as a finding (docs/reliability.md).
class InternalError : public Error {
 public:
  using Error::Error;
};

// Throws octet::Error with the streamed message parts concatenated.
template <typename... Args>
[[noreturn]] void Fail(const Args&... args) {
  throw Error(detail::Concat(args...));
}

// Throws InternalError("internal: " + the parts).
template <typename... Args>
[[noreturn]] void FailInternal(const Args&... args) {
  throw InternalError(detail::Concat("internal: ", args...));
}

// Rethrows e with the context parts in front of its message, internal if e was.
template <typename... Args>
[[noreturn]] void FailWithContext(const Error& e, const Args&... context) {
  std::string message = detail::Concat(context..., e.what());
  if (dynamic_cast<const InternalError*>(&e) != nullptr) throw InternalError(message);
  throw Error(message);
}

}  // namespace octet

// OCTET_CHECK(cond, parts...) throws octet::Error(parts...) when cond is false.
#define OCTET_CHECK(cond, ...)               \
  do {                                       \
    if (!(cond)) ::octet::Fail(__VA_ARGS__); \
  } while (0)
