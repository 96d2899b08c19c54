// Where a tensor lives: the CPU, or one CUDA device.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace brigade {

enum class DeviceKind : uint8_t { CPU, CUDA };

struct Device {
  DeviceKind kind = DeviceKind::CPU;
  int index = 0;  ///< CUDA ordinal; always 0 for the CPU

  static Device cpu() { return {DeviceKind::CPU, 0}; }
  static Device cuda(int index = 0) { return {DeviceKind::CUDA, index}; }
  /// Parses "cpu", "cuda", "cuda:N"; throws DeviceError naming the accepted forms.
  static Device parse(const std::string& text);

  bool is_cpu() const { return kind == DeviceKind::CPU; }
  bool is_cuda() const { return kind == DeviceKind::CUDA; }
  /// "cpu" or "cuda:N".
  std::string str() const;

  friend bool operator==(const Device& a, const Device& b) { return a.kind == b.kind && a.index == b.index; }
  friend bool operator!=(const Device& a, const Device& b) { return !(a == b); }
};

std::ostream& operator<<(std::ostream& out, const Device& device);

/// True when brigade was compiled with CUDA support.
bool cuda_compiled();
/// Number of usable CUDA devices; 0 without a GPU, a driver, or a CUDA build (never throws).
int cuda_device_count();
/// True when at least one CUDA device is usable.
inline bool cuda_available() { return cuda_device_count() > 0; }
/// Why CUDA is unavailable ("built without CUDA", "no CUDA driver: ...", ...); empty when it is available.
std::string cuda_unavailable_reason();
/// Throws DeviceError unless `device` exists (CPU always does).
void check_device_exists(const Device& device, const char* op);

}  // namespace brigade
