// The settings of a training run (TrainOptions) and the one table that says, for each of them, its name,
// its member, its help text, whether a resumed run inherits it, and its check (train_option_table).
//
// Everything that walks over the settings walks over the table: validate(), to_json() and from_json()
// (checkpoints' "brigade.train_args", the "train_args" of --metrics), and in apps/train_command.cpp the
// `brigade train` flags and the inheritance of --resume. So a new setting is a member of TrainOptions and
// one row of the table (nn/train_options.cpp), and nothing else; the model is libtorch's options structs,
// whose fields are declared once and reach the Python-style keyword arguments from there.
//
// \code
//   brigade::nn::for_each_train_option([](const auto& option) {  // option: a TrainOption<T>
//     std::printf("%s: %s\n", option.flag().c_str(), option.help);
//   });
// \endcode
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace brigade::nn {

/// The settings of a training run. Field names mirror the `brigade train` flags (--min-lr is min_lr, ...);
/// their help texts and checks are the rows of train_option_table().
struct TrainOptions {
  std::string data;  ///< UTF-8 text file; empty: the embedded addition corpus (nn/corpus.h)
  int64_t layers = 2;
  int64_t heads = 4;
  int64_t embd = 64;
  int64_t block = 0;  ///< context length; 0: automatic (one line of the default corpus, 64 with data)
  int64_t batch = 128;
  int64_t steps = 3000;
  double lr = 3e-3;
  double min_lr = 3e-4;
  int64_t warmup = 100;
  double weight_decay = 0.1;
  double dropout = 0.0;
  double grad_clip = 1.0;    ///< 0: no clipping (the norm is still computed and checked)
  int64_t eval_every = 250;  ///< 0: only at the end
  int64_t eval_iters = 20;
  std::string device = "cpu";
  /// OpenMP threads for the CPU kernels; 0: chosen from the core count (the plain loop: OpenMP's setting,
  /// OMP_NUM_THREADS or every core; a pipeline: the cores shared out among its stages, at least 1 each).
  /// The default is 1: the default model's ops are too small to gain from a second thread, and OpenMP
  /// threads that spin at barriers make a run many times slower as soon as another process wants a core
  /// (measured on 2 cores: 21 ms/step with 1 thread, 316 ms/step with 2 while a compiler ran).
  int threads = 1;
  uint64_t seed = 1337;
  /// fp32, or bf16: mixed precision through autocast (autograd/autocast.h): bf16 GEMM inputs with fp32
  /// accumulation, fp32 norms, softmax and loss, fp32 master weights, gradients and AdamW state.
  std::string dtype = "fp32";
  std::string save;        ///< checkpoint path; empty: no checkpoint
  int64_t save_every = 0;  ///< also save every N steps (0: only at the end)
  std::string resume;      ///< checkpoint to resume from; empty: a fresh model
  std::string metrics;     ///< JSON file for the final figures; empty: none

  // Pipeline parallelism (docs/pipeline.md, pipeline/). Plain data here, so that nn can validate the numbers,
  // save them in checkpoints' train_args and inherit them on --resume; the pipeline layer
  // (pipeline/run/train_runner.h) checks the names and runs them. nn::train alone runs only the plain loop
  // (see uses_pipeline()). The library's defaults are the plain loop; `brigade train` defaults to
  // --stages 2 --microbatches 4.
  int64_t stages = 1;                ///< pipeline stages S
  int64_t microbatches = 1;          ///< M: the batch is cut into M microbatches (batch % M == 0)
  std::string schedule = "1f1b";     ///< a generator's name (pipeline/schedule/generators.h)
  std::string schedule_file;         ///< a schedule file run instead (pipeline/schedule/schedule_file.h)
  int64_t virtual_chunks = 1;        ///< --virtual v: model chunks per stage (interleaved, looped-bfs)
  std::string recompute = "never";   ///< never, always, except-last
  std::string partition = "params";  ///< params, time, memory (or balance, with --balance)
  std::string balance;               ///< layers per model chunk, "3,3,2"; empty: cut by `partition`
  std::string devices;               ///< one device per stage or one for all, "cuda:0,cuda:0"; empty: device
  /// D: replicas of the pipeline, each on its own processes (docs/distributed.md); S x D processes in all.
  int64_t data_parallel = 1;
  /// With D > 1: the cap of a gradient bucket in MiB (pipeline/schedule/reduce_buckets.h): each bucket's
  /// all-reduce starts as soon as its gradients are final.
  double bucket_mb = 1.0;
  double timeout = 10.0;  ///< across processes: seconds a rank waits for a message before the run fails
  /// Fault injection, for tests of failure handling: "N:S:ACTION" makes stage S raise an error when it
  /// reaches ACTION (F3, B0, Bi2, Bw1, R0) in this invocation's N-th step; empty: none.
  std::string fail_at;
  /// Across processes: what carries the tensors between them: auto (NCCL for device tensors where it is
  /// built and the schedule allows it, else MPI), mpi, or nccl.
  std::string transport = "auto";
  std::string memory_budget;  ///< per-stage budget ("512MiB"), certified before any step; empty: none
  std::string trace;          ///< Chrome trace JSON of one steady step; empty: none
  std::string timeline;       ///< SVG timeline of that step; empty: none
  /// "auto": the planner (pipeline/plan/planner.h) chooses stages, microbatches, schedule, chunks,
  /// recomputation and balance for plan_devices devices (and --memory-budget each) before the first step,
  /// overriding those flags; "": the flags as given.
  std::string plan;
  int64_t plan_devices = 0;  ///< devices the planner may use; 0: the CPU's cores / --threads, or 1 GPU

  /// ValueError naming the flag and the value for the first invalid setting, in table order (negative or
  /// zero sizes, heads not dividing embd, learning rates, dropout outside [0, 1), an unknown device
  /// string, ...). Does not touch files or devices.
  void validate() const;
  /// block, or its automatic value.
  int64_t resolved_block() const;
  /// Whether the run needs the pipeline engine: more than one stage, microbatch or chunk, or any pipeline
  /// setting away from what the plain loop does (recompute, balance, devices, budget, trace, timeline, a
  /// schedule file).
  bool uses_pipeline() const;
  /// Every setting as one JSON object keyed by the table's names (stored in checkpoints as
  /// "brigade.train_args").
  std::string to_json() const;
  /// Parses to_json()'s output; missing fields keep their defaults, unknown ones are ignored (a newer
  /// brigade may add some); wrong types are ValueErrors naming the field.
  static TrainOptions from_json(const std::string& text);
};

/// What `brigade train --resume` does with a setting the command line does not give.
enum class OnResume {
  Inherit,        ///< the checkpoint's recorded value: the resumed run continues the run that was saved
  PerInvocation,  ///< this invocation's value: where and how this process runs, and what it writes out
};

/// Whether a flag's --help line shows its default.
enum class HelpDefault {
  Shown,
  Hidden,  ///< the default is "none" or "automatic", which the help text itself explains
};

/// One row of train_option_table(): a setting of type T (the member's type).
template <typename T>
struct TrainOption {
  /// The JSON key; with '-' for '_' and "--" in front, the flag: "min_lr" is --min-lr.
  const char* name;
  T TrainOptions::*member;
  const char* help;  ///< the flag's help text
  OnResume on_resume;
  HelpDefault help_default;
  /// Throws a ValueError naming `flag` when `value` cannot work; may also read the settings of earlier
  /// rows in `all` (validate() runs the checks in table order). nullptr: every value passes here (the names
  /// of schedules, partitions and recompute policies are the pipeline's to check:
  /// pipeline/run/train_runner.h).
  void (*check)(const std::string& flag, const T& value, const TrainOptions& all) = nullptr;

  /// "--min-lr".
  std::string flag() const {
    std::string text = std::string("--") + name;
    for (char& c : text) c = c == '_' ? '-' : c;
    return text;
  }
};

/// A row of any setting's type. std::visit it: the lambda sees the TrainOption<T> with the right T.
using AnyTrainOption = std::variant<TrainOption<std::string>, TrainOption<int64_t>, TrainOption<int>,
                                    TrainOption<uint64_t>, TrainOption<double>>;

/// Every setting of TrainOptions, in the order of `brigade train --help`.
const std::vector<AnyTrainOption>& train_option_table();

/// Calls fn(option) for every row in table order, with the row's TrainOption<T> (fn is a generic lambda).
template <typename Fn>
void for_each_train_option(Fn&& fn) {
  for (const AnyTrainOption& row : train_option_table()) std::visit(fn, row);
}

}  // namespace brigade::nn
