// brigade's error family and the BRIGADE_CHECK macros.
//
// Every user-facing failure is a typed exception deriving from brigade::Error. The message names the
// operation, what was expected and what was found, and ends with the source location, e.g.
//   "add: shapes [2, 3] and [4] cannot be broadcast (dim -1: 3 vs 4) [kernels/elementwise.cpp:57]"
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace brigade {

/// Base of every exception brigade throws.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
/// Shapes that do not fit together (broadcasting, matmul inner dims, reshape element counts, ...).
class ShapeError : public Error { using Error::Error; };
/// A dtype the operation does not accept, or two operands whose dtypes differ.
class DTypeError : public Error { using Error::Error; };
/// Operands on different devices (brigade never copies silently), or a device that does not exist.
class DeviceError : public Error { using Error::Error; };
/// An allocator could not satisfy a request; the message gives requested and free bytes.
class OutOfMemoryError : public Error { using Error::Error; };
/// File input/output: missing, truncated, corrupt or incompatible files.
class IOError : public Error { using Error::Error; };
/// A value outside its valid range: an index, an id, a flag value.
class ValueError : public Error { using Error::Error; };
/// Misuse of autograd: backward on a non-scalar without a gradient, a second backward without retain_graph.
class AutogradError : public Error { using Error::Error; };

namespace detail {

template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

template <typename E>
[[noreturn]] void throw_error(const char* file, int line, const std::string& message) {
  throw E(concat(message, " [", file, ":", line, "]"));
}

}  // namespace detail
}  // namespace brigade

/// Throws ErrorType with the streamed message (and file:line) when `cond` is false.
#define BRIGADE_CHECK_AS(ErrorType, cond, ...)                                                   \
  do {                                                                                           \
    if (!(cond)) {                                                                               \
      ::brigade::detail::throw_error<ErrorType>(__FILE__, __LINE__,                              \
                                                ::brigade::detail::concat(__VA_ARGS__));         \
    }                                                                                            \
  } while (0)

#define BRIGADE_CHECK(cond, ...) BRIGADE_CHECK_AS(::brigade::Error, cond, __VA_ARGS__)
#define BRIGADE_CHECK_SHAPE(cond, ...) BRIGADE_CHECK_AS(::brigade::ShapeError, cond, __VA_ARGS__)
#define BRIGADE_CHECK_DTYPE(cond, ...) BRIGADE_CHECK_AS(::brigade::DTypeError, cond, __VA_ARGS__)
#define BRIGADE_CHECK_DEVICE(cond, ...) BRIGADE_CHECK_AS(::brigade::DeviceError, cond, __VA_ARGS__)
#define BRIGADE_CHECK_VALUE(cond, ...) BRIGADE_CHECK_AS(::brigade::ValueError, cond, __VA_ARGS__)
#define BRIGADE_THROW(ErrorType, ...) \
  ::brigade::detail::throw_error<ErrorType>(__FILE__, __LINE__, ::brigade::detail::concat(__VA_ARGS__))
