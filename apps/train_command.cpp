// `brigade train`: the flags of nn::TrainOptions, checked before any work starts (exit 2 with a usage line
// for values that cannot work), then nn::train with a progress display, a summary and --metrics JSON.
//
// By default the step runs as a pipeline (--stages 2 --microbatches 4 --schedule 1f1b:
// pipeline/run/train_runner.h is the engine); --stages 1 --microbatches 1 runs the plain loop. After the run
// the partition table, the memory per stage (predicted beside measured) and the bubble (measured, simulated)
// are printed.
//
// --resume FILE continues a run: the model comes from the checkpoint, and every training flag not given on
// this command line takes the checkpoint's recorded value (so `brigade train --resume run.safetensors`
// continues exactly, and `--steps 5000` extends it); --device, --devices, --threads, --memory-budget,
// --metrics, --trace and --timeline are per invocation. Which is which, like every flag's name, member,
// help and check, is a row of nn::train_option_table() (nn/train_options.h): the flags below are made
// from it.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <string>

#include "apps/commands.h"
#include "apps/progress.h"
#include "apps/train_processes.h"
#include "nn/checkpoint.h"
#include "nn/data.h"
#include "nn/trainer.h"
#include "pipeline/run/train_runner.h"
#include "tensor/device.h"

namespace brigade::apps {

namespace {

// Takes every setting the table marks OnResume::Inherit that the user did not give from the checkpoint's
// recorded run.
void inherit_from_checkpoint(const CLI::App& cmd, const nn::Checkpoint& checkpoint,
                             nn::TrainOptions& options) {
  const nn::TrainOptions saved = nn::TrainOptions::from_json(checkpoint.info.train_args);
  nn::for_each_train_option([&](const auto& option) {
    if (option.on_resume == nn::OnResume::Inherit && cmd.get_option(option.flag())->count() == 0) {
      options.*option.member = saved.*option.member;
    }
  });
  // A checkpoint written by a program that records no train args: keep its model shape at least.
  if (checkpoint.info.train_args == "{}") {
    if (cmd.get_option("--layers")->count() == 0) options.layers = checkpoint.config.n_layer;
    if (cmd.get_option("--heads")->count() == 0) options.heads = checkpoint.config.n_head;
    if (cmd.get_option("--embd")->count() == 0) options.embd = checkpoint.config.n_embd;
    if (cmd.get_option("--block")->count() == 0) options.block = checkpoint.config.block_size;
  }
}

// One CLI11 flag per row of the table, bound to its member of `options`.
void add_train_flags(CLI::App& cmd, nn::TrainOptions& options) {
  nn::for_each_train_option([&](const auto& option) {
    CLI::Option* flag = cmd.add_option(option.flag(), options.*option.member, option.help);
    if (option.help_default == nn::HelpDefault::Shown) flag->capture_default_str();
  });
}

void print_summary(const nn::TrainResult& r) {
  std::printf("done: %lld steps in %s (%.1f ms/step, %s tok/s, peak memory %.1f MiB on %s)\n",
              static_cast<long long>(r.steps), Progress::format_duration(r.wall_s).c_str(), r.ms_per_step,
              Progress::format_rate(r.tokens_per_s).c_str(), static_cast<double>(r.peak_bytes) / (1 << 20),
              r.device.c_str());
  std::printf("final train loss %.4f, val loss %.4f\n", r.final_loss, r.val_loss);
  if (r.accuracy) {
    std::printf("held-out exact-match accuracy: %.1f%% (%lld/%lld)\n", 100.0 * *r.accuracy,
                static_cast<long long>(r.correct), static_cast<long long>(r.total));
    for (const std::string& mistake : r.mistakes) std::printf("  wrong: %s\n", mistake.c_str());
  }
}

constexpr int64_t kDefaultStages = 2, kDefaultMicrobatches = 4;

// Everything that would make the run fail for a reason the flags can fix, so that it exits 2 before any
// work: the message for the usage line, or "" when the flags can work. Without --device, --devices names
// the model's device too (all stages share one): it is set in `options` here.
std::string check_flags(const CLI::App& cmd, const std::optional<nn::Checkpoint>& checkpoint,
                        nn::TrainOptions& options) {
  try {
    if (!options.devices.empty() && cmd.get_option("--device")->count() == 0) {
      options.device = pipeline::stage_devices(options).front().str();
    }
    pipeline::check_train_options(options);  // TrainOptions::validate() and the pipeline's names
    if (checkpoint) nn::check_resume_compatible(options, *checkpoint);
    if (!options.devices.empty()) {
      const Device stages_on = pipeline::stage_devices(options).front();
      BRIGADE_CHECK_VALUE(stages_on == Device::parse(options.device), "--devices '", options.devices,
                          "' and --device ", options.device,
                          " disagree: the model and its stages share one device");
    }
  } catch (const ValueError& e) {
    return e.what();
  }
  const std::string unavailable = unavailable_device(Device::parse(options.device), options.device);
  if (!unavailable.empty()) return unavailable;
  if (!options.devices.empty()) {  // every stage's device, not only the first (which --device shares)
    for (const Device& d : pipeline::stage_devices(options)) {
      const std::string missing = unavailable_device(d, d.str(), "--devices '" + options.devices + "': ");
      if (!missing.empty()) return missing;
    }
  }
  if (!options.data.empty()) {
    try {
      (void)nn::read_text_file(options.data);
    } catch (const IOError& e) {
      return std::string("--data: ") + e.what();
    }
  }
  return "";
}

// The summaries, then the files the flags ask for: --trace, --timeline (pipelined runs) and --metrics.
void report_run(const nn::TrainResult& result, const nn::TrainOptions& options,
                const pipeline::PipelineRunner* runner) {
  print_summary(result);
  std::string metrics = result.metrics_json(options);
  if (runner != nullptr) {
    std::printf("%s", runner->summary().c_str());
    metrics = runner->add_metrics(metrics);
    if (!options.trace.empty()) {
      write_text_file(options.trace, runner->trace_json(), "trace");
      std::printf("trace written to %s (open in ui.perfetto.dev)\n", options.trace.c_str());
    }
    if (!options.timeline.empty()) {
      write_text_file(options.timeline, runner->timeline_svg(), "timeline");
      std::printf("timeline written to %s\n", options.timeline.c_str());
    }
  }
  if (!options.metrics.empty()) {
    write_text_file(options.metrics, metrics, "metrics");
    std::printf("metrics written to %s\n", options.metrics.c_str());
  }
}

int run_train(const CLI::App& cmd, nn::TrainOptions options) {
  // Under mpirun every rank runs this with the same flags (docs/distributed.md); rank 0 does the talking.
  const TrainProcesses processes = join_processes();
  std::optional<nn::Checkpoint> checkpoint;
  if (!options.resume.empty()) {
    checkpoint = nn::load_checkpoint(options.resume);  // IOError (exit 1) for a bad or corrupt file
    inherit_from_checkpoint(cmd, *checkpoint, options);
  }
  std::string problem = check_process_flags(options, processes);
  if (problem.empty()) problem = check_flags(cmd, checkpoint, options);
  if (!problem.empty()) return processes.prints() ? usage_error(cmd, problem) : kUsageExit;
  const std::string layout = rank_layout_table(options, processes);
  if (processes.prints()) std::printf("%s", layout.c_str());

  Progress progress(stdout, ::isatty(::fileno(stdout)) != 0, checkpoint ? checkpoint->info.step : 0,
                    options.steps);
  nn::TrainHooks hooks;
  if (processes.prints()) {
    hooks.on_message = [&](const std::string& text) { progress.message(text); };
    hooks.on_step = [&](const nn::StepReport& r) { progress.step(r); };
    hooks.on_eval = [&](const nn::EvalReport& r) { progress.eval(r); };
  }
  std::unique_ptr<pipeline::PipelineRunner> runner;
  if (options.uses_pipeline() || processes.world)
    runner = std::make_unique<pipeline::PipelineRunner>(options, processes.world.get());
  nn::TrainResult result;
  try {
    result = nn::train(options, hooks, runner.get());
  } catch (const pipeline::MemoryBudgetExceeded& e) {
    // Refused by the memory model before any step: a flag value the user can change.
    progress.finish();
    return usage_error(cmd, e.what());
  } catch (const std::exception&) {
    progress.finish();
    end_processes_after_failure(processes, options, std::current_exception());  // exits across processes
    throw;
  }
  progress.finish();
  if (processes.world) runner->gather_trace();  // collective: rank 0 merges the ranks' traces
  if (processes.prints()) report_run(result, options, runner.get());
  return 0;
}

}  // namespace

Command add_train_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "train", "Train a GPT on the built-in addition task (default) or on a UTF-8 text file (--data)");
  auto o = std::make_shared<nn::TrainOptions>();
  // The CLI runs a pipeline by default (the library's TrainOptions default to the plain loop).
  o->stages = kDefaultStages;
  o->microbatches = kDefaultMicrobatches;
  add_train_flags(*cmd, *o);
  return {cmd, [cmd, o] { return run_train(*cmd, *o); }};
}

}  // namespace brigade::apps
