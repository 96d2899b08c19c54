// The `brigade` binary's subcommands. Each registers its flags on a CLI11 subcommand and returns a runner
// that is called only if that subcommand was chosen.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>

#include "tensor/device.h"
#include "tensor/error.h"

namespace brigade::apps {

/// A registered subcommand and what to run when it is chosen (returns the exit status).
struct Command {
  CLI::App* app;
  std::function<int()> run;
};

/// Exit status of a bad flag or flag value (CLI11 parse errors and the commands' own checks).
inline constexpr int kUsageExit = 2;

/// Writes `text` to the file a flag named (a trace, a picture, metrics); IOError naming `what` and the path
/// when it cannot.
inline void write_text_file(const std::string& path, const std::string& text, const char* what) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) BRIGADE_THROW(IOError, "cannot write the ", what, " file '", path, "'");
}

/// The one-line usage of `command` ("usage: brigade train [flags]  (brigade train --help for details)").
inline std::string usage_line(const CLI::App& command) {
  const std::string name =
      command.get_parent() != nullptr ? "brigade " + command.get_name() : "brigade <command>";
  return "usage: " + name + " [flags]   (" + name + " --help for details)";
}

/// Prints "brigade <command>: <message>" and the usage line to stderr; returns kUsageExit. For flag values
/// that parse but make no sense together (heads not dividing embd, a missing data file, ...).
/// A library error's " [file.cpp:123]" suffix is dropped: here the message is about the user's flags.
inline int usage_error(const CLI::App& command, std::string message) {
  const size_t where = message.rfind(" [");
  if (where != std::string::npos && message.back() == ']' && message.find(':', where) != std::string::npos) {
    message.erase(where);
  }
  std::fprintf(stderr, "brigade %s: %s\n%s\n", command.get_name().c_str(), message.c_str(),
               usage_line(command).c_str());
  return kUsageExit;
}

/// "" when `device` exists on this machine; otherwise the usage message naming it as `what`, by default the
/// --device flag of value `flag_value`: "--device cuda:3 is not available (1 CUDA device)", with the reason
/// when none is.
inline std::string unavailable_device(const Device& device, const std::string& flag_value,
                                      const std::string& flag = "--device ") {
  const int count = cuda_device_count();
  if (!device.is_cuda() || device.index < count) return "";
  return flag + flag_value + " is not available (" + std::to_string(count) + " CUDA device" +
         (count == 1 ? "" : "s") + (count == 0 ? ": " + cuda_unavailable_reason() : std::string()) + ")";
}

/// `brigade info`: build configuration, devices, memory.
Command add_info_command(CLI::App& app);
/// `brigade demo`: a short autograd walk-through (fits a line by gradient descent).
Command add_demo_command(CLI::App& app);
/// `brigade kernel`: the kernel lab, one version of one kernel on a chosen shape (apps/kernel_lab.h).
Command add_kernel_command(CLI::App& app);
/// `brigade schedule`: draws a pipeline schedule and reports its bubble and memory (pipeline/).
Command add_schedule_command(CLI::App& app);
/// `brigade train`: trains a GPT on the default corpus or a text file (nn/trainer.h).
Command add_train_command(CLI::App& app);
/// `brigade bench-link`: ping-pong between the processes of an MPI job, fitted as latency + bandwidth.
Command add_bench_link_command(CLI::App& app);
/// `brigade plan`: searches and ranks pipeline configurations for a GPT (pipeline/plan/planner.h).
Command add_plan_command(CLI::App& app);
/// `brigade sample`: generates text from a checkpoint.
Command add_sample_command(CLI::App& app);

}  // namespace brigade::apps
