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
// --metrics, --trace and --timeline are per invocation.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>

#include "apps/commands.h"
#include "apps/progress.h"
#include "nn/checkpoint.h"
#include "nn/data.h"
#include "nn/trainer.h"
#include "pipeline/run/train_runner.h"
#include "tensor/device.h"

namespace brigade::apps {

namespace {

void write_text_file(const std::string& path, const std::string& text, const char* what) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) BRIGADE_THROW(IOError, "cannot write ", what, " file '", path, "'");
}

// Takes every training setting the user did not give from the checkpoint's recorded run.
void inherit_from_checkpoint(const CLI::App& cmd, const nn::Checkpoint& checkpoint,
                             nn::TrainOptions& options) {
  const nn::TrainOptions saved = nn::TrainOptions::from_json(checkpoint.info.train_args);
  auto inherit = [&](const char* flag, auto member) {
    if (cmd.get_option(flag)->count() == 0) options.*member = saved.*member;
  };
  using O = nn::TrainOptions;
  inherit("--data", &O::data);
  inherit("--layers", &O::layers);
  inherit("--heads", &O::heads);
  inherit("--embd", &O::embd);
  inherit("--block", &O::block);
  inherit("--batch", &O::batch);
  inherit("--steps", &O::steps);
  inherit("--lr", &O::lr);
  inherit("--min-lr", &O::min_lr);
  inherit("--warmup", &O::warmup);
  inherit("--weight-decay", &O::weight_decay);
  inherit("--dropout", &O::dropout);
  inherit("--grad-clip", &O::grad_clip);
  inherit("--eval-every", &O::eval_every);
  inherit("--eval-iters", &O::eval_iters);
  inherit("--seed", &O::seed);
  inherit("--dtype", &O::dtype);
  inherit("--save", &O::save);
  inherit("--save-every", &O::save_every);
  inherit("--stages", &O::stages);
  inherit("--microbatches", &O::microbatches);
  inherit("--schedule", &O::schedule);
  inherit("--virtual", &O::virtual_chunks);
  inherit("--recompute", &O::recompute);
  inherit("--partition", &O::partition);
  inherit("--balance", &O::balance);
  // A checkpoint written by a program that records no train args: keep its model shape at least.
  if (checkpoint.info.train_args == "{}") {
    if (cmd.get_option("--layers")->count() == 0) options.layers = checkpoint.config.n_layer;
    if (cmd.get_option("--heads")->count() == 0) options.heads = checkpoint.config.n_head;
    if (cmd.get_option("--embd")->count() == 0) options.embd = checkpoint.config.n_embd;
    if (cmd.get_option("--block")->count() == 0) options.block = checkpoint.config.block_size;
  }
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

void add_pipeline_flags(CLI::App& cmd, nn::TrainOptions& o) {
  cmd.add_option("--stages", o.stages,
                 "pipeline stages (one thread, or one GPU stream, each); --stages 1 --microbatches 1: no "
                 "pipeline")
      ->capture_default_str();
  cmd.add_option("--microbatches", o.microbatches, "microbatches per step (must divide --batch)")
      ->capture_default_str();
  cmd.add_option("--schedule", o.schedule, "gpipe, 1f1b, interleaved or zb-h1")->capture_default_str();
  cmd.add_option("--virtual", o.virtual_chunks, "model chunks per stage (--schedule interleaved)")
      ->capture_default_str();
  cmd.add_option("--recompute", o.recompute, "activation recomputation: never, always or except-last")
      ->capture_default_str();
  cmd.add_option("--partition", o.partition,
                 "cut the layers into stages by params, time (profiled) or memory (profiled)")
      ->capture_default_str();
  cmd.add_option("--balance", o.balance, "layers per stage (per chunk with --virtual), e.g. 2,2");
  cmd.add_option("--devices", o.devices,
                 "the stages' device: one for all (cpu, cuda:0) or one per stage, all the same");
  cmd.add_option(
      "--memory-budget", o.memory_budget,
      "refuse, before any step, a plan whose predicted peak on a stage exceeds this (512MiB, 2GiB)");
  cmd.add_option("--trace", o.trace, "write a Chrome trace (JSON) of one steady step, simulated beside it");
  cmd.add_option("--timeline", o.timeline, "write an SVG timeline of one steady step");
}

void print_pipeline_summary(const pipeline::PipelineRunner& runner) {
  std::printf("%s", runner.summary().c_str());
}

}  // namespace

Command add_train_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "train", "Train a GPT on the built-in addition task (default) or on a UTF-8 text file (--data)");
  auto o = std::make_shared<nn::TrainOptions>();
  // The CLI runs a pipeline by default (the library's TrainOptions default to the plain loop).
  o->stages = kDefaultStages;
  o->microbatches = kDefaultMicrobatches;
  cmd->add_option("--data", o->data,
                  "UTF-8 text file to train on (default: the built-in 3-digit addition task)");
  cmd->add_option("--layers", o->layers, "transformer blocks")->capture_default_str();
  cmd->add_option("--heads", o->heads, "attention heads (must divide --embd)")->capture_default_str();
  cmd->add_option("--embd", o->embd, "embedding width")->capture_default_str();
  cmd->add_option(
      "--block", o->block,
      "context length in characters (default: one line, 13, of the addition task; 64 with --data)");
  cmd->add_option("--batch", o->batch, "sequences per step")->capture_default_str();
  cmd->add_option("--steps", o->steps, "total optimizer steps (a resumed run continues up to this step)")
      ->capture_default_str();
  cmd->add_option("--lr", o->lr, "peak learning rate (AdamW)")->capture_default_str();
  cmd->add_option("--min-lr", o->min_lr, "learning rate at the end of the cosine decay")
      ->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "linear warmup steps")->capture_default_str();
  cmd->add_option("--weight-decay", o->weight_decay, "AdamW weight decay (matrices only)")
      ->capture_default_str();
  cmd->add_option("--dropout", o->dropout, "dropout probability")->capture_default_str();
  cmd->add_option("--grad-clip", o->grad_clip, "clip the global gradient norm to this (0: off)")
      ->capture_default_str();
  cmd->add_option("--eval-every", o->eval_every, "evaluate every N steps (0: only at the end)")
      ->capture_default_str();
  cmd->add_option("--eval-iters", o->eval_iters, "validation batches per evaluation")->capture_default_str();
  cmd->add_option("--device", o->device, "cpu, cuda or cuda:N")->capture_default_str();
  cmd->add_option("--threads", o->threads,
                  "CPU threads for the kernels (OpenMP; 0: OMP_NUM_THREADS or every core)")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "seed of the weights, batches and dropout")->capture_default_str();
  cmd->add_option("--dtype", o->dtype,
                  "fp32, or bf16: mixed precision (bf16 GEMM inputs, fp32 accumulation, norms, loss and "
                  "master weights)")
      ->capture_default_str();
  cmd->add_option("--save", o->save, "write a checkpoint (safetensors) here at the end");
  cmd->add_option("--save-every", o->save_every, "also checkpoint every N steps (needs --save)");
  cmd->add_option("--resume", o->resume, "continue the run saved in this checkpoint");
  cmd->add_option("--metrics", o->metrics, "write the run's final figures to this JSON file");
  add_pipeline_flags(*cmd, *o);

  return {cmd, [cmd, o] {
            nn::TrainOptions options = *o;
            std::optional<nn::Checkpoint> checkpoint;
            if (!options.resume.empty()) {
              checkpoint = nn::load_checkpoint(options.resume);  // IOError (exit 1) for a bad or corrupt file
              inherit_from_checkpoint(*cmd, *checkpoint, options);
            }
            // --devices names the model's device too (all stages share one).
            if (!options.devices.empty() && cmd->get_option("--device")->count() == 0) {
              try {
                options.device = pipeline::stage_devices(options).front().str();
              } catch (const ValueError& e) {
                return usage_error(*cmd, e.what());
              }
            }
            // Everything that would make the run fail for a reason the flags can fix: exit 2 before any work.
            try {
              pipeline::check_train_options(options);  // TrainOptions::validate() and the pipeline's names
              if (checkpoint) nn::check_resume_compatible(options, *checkpoint);
              if (!options.devices.empty()) {
                const Device stages_on = pipeline::stage_devices(options).front();
                BRIGADE_CHECK_VALUE(stages_on == Device::parse(options.device), "--devices '",
                                    options.devices, "' and --device ", options.device,
                                    " disagree: the model and its stages share one device");
              }
            } catch (const ValueError& e) {
              return usage_error(*cmd, e.what());
            }
            const Device device = Device::parse(options.device);
            if (device.is_cuda() && device.index >= cuda_device_count()) {
              return usage_error(*cmd, "--device " + options.device + " is not available (" +
                                           std::to_string(cuda_device_count()) + " CUDA devices" +
                                           (cuda_available() ? "" : ": " + cuda_unavailable_reason()) + ")");
            }
            if (!options.data.empty()) {
              try {
                (void)nn::read_text_file(options.data);
              } catch (const IOError& e) {
                return usage_error(*cmd, std::string("--data: ") + e.what());
              }
            }

            Progress progress(stdout, ::isatty(::fileno(stdout)) != 0, checkpoint ? checkpoint->info.step : 0,
                              options.steps);
            nn::TrainHooks hooks;
            hooks.on_message = [&](const std::string& text) { progress.message(text); };
            hooks.on_step = [&](const nn::StepReport& r) { progress.step(r); };
            hooks.on_eval = [&](const nn::EvalReport& r) { progress.eval(r); };
            std::unique_ptr<pipeline::PipelineRunner> runner;
            if (options.uses_pipeline()) runner = std::make_unique<pipeline::PipelineRunner>(options);
            nn::TrainResult result;
            try {
              result = nn::train(options, hooks, runner.get());
            } catch (const pipeline::MemoryBudgetExceeded& e) {
              // Refused by the memory model before any step: a flag value the user can change.
              progress.finish();
              return usage_error(*cmd, e.what());
            } catch (...) {
              progress.finish();
              throw;
            }
            progress.finish();
            print_summary(result);
            std::string metrics = result.metrics_json(options);
            if (runner) {
              print_pipeline_summary(*runner);
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
            return 0;
          }};
}

}  // namespace brigade::apps
