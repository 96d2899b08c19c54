// The `brigade` binary's subcommands. Each registers its flags on a CLI11 subcommand and returns a runner
// that is called only if that subcommand was chosen.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace brigade::apps {

/// A registered subcommand and what to run when it is chosen (returns the exit status).
struct Command {
  CLI::App* app;
  std::function<int()> run;
};

/// `brigade info`: build configuration, devices, memory.
Command add_info_command(CLI::App& app);
/// `brigade demo`: a short autograd walk-through (fits a line by gradient descent).
Command add_demo_command(CLI::App& app);
/// `brigade schedule`: draws a pipeline schedule and reports its bubble and memory (pipeline/).
Command add_schedule_command(CLI::App& app);

}  // namespace brigade::apps
