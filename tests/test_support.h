// Shared test helpers: CUDA skipping, tensor comparison with stated tolerances, the message of an expected
// exception, and a fixture with a scratch directory of its own.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tensor/tensor.h"

/// Skips the current test with the reason when no CUDA device can be used. With BRIGADE_REQUIRE_GPU=1 in
/// the environment (scripts/gpu_check.sh sets it) a missing GPU fails the test instead of skipping it.
#define BRIGADE_REQUIRE_CUDA()                                                                               \
  do {                                                                                                       \
    if (!::brigade::cuda_available()) {                                                                      \
      if (std::getenv("BRIGADE_REQUIRE_GPU") != nullptr) {                                                   \
        FAIL() << "BRIGADE_REQUIRE_GPU is set but no CUDA device: " << ::brigade::cuda_unavailable_reason(); \
      }                                                                                                      \
      GTEST_SKIP() << "no CUDA device: " << ::brigade::cuda_unavailable_reason();                            \
    }                                                                                                        \
  } while (0)

namespace brigade::testing {

/// Max over elements of |a - b| / (atol + rtol * |b|); <= 1 means every element is within tolerance.
/// Shapes must match; both are brought to the CPU as float64.
inline ::testing::AssertionResult allclose(const Tensor& actual, const Tensor& expected, double rtol,
                                           double atol) {
  if (actual.shape() != expected.shape()) {
    return ::testing::AssertionFailure()
           << "shape " << shape_str(actual.shape()) << " vs expected " << shape_str(expected.shape());
  }
  std::vector<double> a = actual.to_vector<double>();
  std::vector<double> b = expected.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    bool both_nan = std::isnan(a[i]) && std::isnan(b[i]);
    bool same_inf = std::isinf(a[i]) && a[i] == b[i];
    if (both_nan || same_inf) continue;
    double err = std::fabs(a[i] - b[i]);
    if (!(err <= atol + rtol * std::fabs(b[i]))) {
      return ::testing::AssertionFailure()
             << "element " << i << ": " << a[i] << " vs expected " << b[i] << " (|diff| " << err << " > atol "
             << atol << " + rtol " << rtol << " * |expected|)";
    }
  }
  return ::testing::AssertionSuccess();
}

/// The message of the E that f() throws. A test failure (and "") when it throws nothing or another type.
template <typename E, typename F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw the wrong type: " << e.what();
    return "";
  }
  ADD_FAILURE() << "did not throw";
  return "";
}

/// The whole file as bytes ("" when it cannot be read).
inline std::string read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
inline void write_file_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

/// A fixture whose every test gets a fresh scratch directory (removed afterwards): file("x") is a path in it.
/// The name carries the suite and the process id, so tests run in parallel by ctest never share one.
class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string suite = ::testing::UnitTest::GetInstance()->current_test_info()->test_suite_name();
    dir_ = std::filesystem::temp_directory_path() / ("brigade_" + suite + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }

  std::filesystem::path dir_;
};

}  // namespace brigade::testing
