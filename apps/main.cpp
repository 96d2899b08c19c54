// brigade: one binary, several subcommands (apps/commands.h: one file each). A bad flag prints the error
// and a usage line and exits with status 2; library errors print their message and exit with status 1.
#include <cstdio>
#include <iostream>
#include <vector>

#include "apps/commands.h"
#include "tensor/error.h"

int main(int argc, char** argv) {
  CLI::App app{"brigade: tensors, kernels, autograd and pipeline-parallel training", "brigade"};
  app.require_subcommand(1);
  std::vector<brigade::apps::Command> commands = {
      brigade::apps::add_info_command(app),     brigade::apps::add_demo_command(app),
      brigade::apps::add_schedule_command(app), brigade::apps::add_kernel_command(app),
      brigade::apps::add_train_command(app),    brigade::apps::add_plan_command(app),
      brigade::apps::add_sample_command(app),   brigade::apps::add_bench_link_command(app),
  };

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    std::cout << app.help("", CLI::AppFormatMode::All);
    return 0;
  } catch (const CLI::ParseError& e) {
    // The usage line of the subcommand the error is about (the top level's when none was chosen).
    const CLI::App* chosen = &app;
    for (const CLI::App* sub : app.get_subcommands()) chosen = sub;
    std::cerr << "brigade: " << e.what() << "\n";
    if (chosen == &app) {
      std::cerr << "usage: brigade <info|demo|schedule|kernel|train|sample|bench-link> [flags]"
                   "   (brigade <command> --help for details)\n";
    } else {
      std::cerr << brigade::apps::usage_line(*chosen) << "\n";
    }
    return brigade::apps::kUsageExit;
  }
  try {
    for (const auto& command : commands) {
      if (command.app->parsed()) return command.run();
    }
  } catch (const brigade::Error& e) {
    std::cerr << "brigade: error: " << e.what() << "\n";
    return 1;
  }
  return 2;
}
