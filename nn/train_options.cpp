// TrainOptions and its table; what they are for is described in nn/train_options.h.
#include "nn/train_options.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "nn/corpus.h"
#include "tensor/device.h"
#include "tensor/error.h"

namespace brigade::nn {
namespace {

using Json = nlohmann::json;
using O = TrainOptions;

// ---- the checks of the rows ---------------------------------------------------------------------------

void positive(const std::string& flag, const int64_t& value, const O&) {
  BRIGADE_CHECK_VALUE(value > 0, flag, " must be a positive integer, found ", value);
}
void non_negative(const std::string& flag, const int64_t& value, const O&) {
  BRIGADE_CHECK_VALUE(value >= 0, flag, " must be >= 0, found ", value);
}

void check_embd(const std::string& flag, const int64_t& embd, const O& o) {
  positive(flag, embd, o);
  BRIGADE_CHECK_VALUE(embd % o.heads == 0, "--heads ", o.heads, " does not divide ", flag, " ", embd,
                      " (each head gets embd / heads channels)");
}
void check_block(const std::string& flag, const int64_t& block, const O&) {
  BRIGADE_CHECK_VALUE(block >= 0, flag, " must be a positive integer (or 0 for automatic), found ", block);
}
void check_lr(const std::string& flag, const double& lr, const O&) {
  BRIGADE_CHECK_VALUE(std::isfinite(lr) && lr > 0.0, flag, " must be a positive number, found ", lr);
}
void check_min_lr(const std::string& flag, const double& min_lr, const O& o) {
  BRIGADE_CHECK_VALUE(std::isfinite(min_lr) && min_lr >= 0.0 && min_lr <= o.lr, flag,
                      " must be in [0, --lr = ", o.lr, "], found ", min_lr);
}
void check_weight_decay(const std::string& flag, const double& decay, const O&) {
  BRIGADE_CHECK_VALUE(std::isfinite(decay) && decay >= 0.0, flag, " must be >= 0, found ", decay);
}
void check_dropout(const std::string& flag, const double& p, const O&) {
  BRIGADE_CHECK_VALUE(p >= 0.0 && p < 1.0, flag, " must be in [0, 1), found ", p);
}
void check_grad_clip(const std::string& flag, const double& clip, const O&) {
  BRIGADE_CHECK_VALUE(std::isfinite(clip) && clip >= 0.0, flag, " must be >= 0 (0: off), found ", clip);
}
void check_device(const std::string& flag, const std::string& device, const O&) {
  try {
    (void)Device::parse(device);  // whether it exists is checked when the run starts
  } catch (const DeviceError&) {
    BRIGADE_THROW(ValueError, flag, " '", device, "' is not a device: expected cpu, cuda or cuda:N");
  }
}
void check_threads(const std::string& flag, const int& threads, const O&) {
  BRIGADE_CHECK_VALUE(threads >= 0, flag, " must be >= 0 (0: chosen from the core count), found ", threads);
}
void check_plan(const std::string& flag, const std::string& plan, const O& o) {
  BRIGADE_CHECK_VALUE(plan.empty() || plan == "auto", flag, " must be auto (or absent), found '", plan, "'");
  BRIGADE_CHECK_VALUE(plan.empty() || o.schedule_file.empty(), flag,
                      " auto chooses the schedule; it cannot run --schedule-file ", o.schedule_file);
}
void check_dtype(const std::string& flag, const std::string& dtype, const O&) {
  BRIGADE_CHECK_VALUE(dtype == "fp32" || dtype == "bf16", flag, " must be fp32 or bf16, found '", dtype, "'");
}
void check_save_every(const std::string& flag, const int64_t& every, const O& o) {
  non_negative(flag, every, o);
  BRIGADE_CHECK_VALUE(every == 0 || !o.save.empty(), flag, " ", every, " needs --save FILE");
}
void check_microbatches(const std::string& flag, const int64_t& microbatches, const O& o) {
  positive(flag, microbatches, o);
  BRIGADE_CHECK_VALUE(o.batch % microbatches == 0, "--batch ", o.batch, " is not divisible by ", flag, " ",
                      microbatches, " (every microbatch must have batch / microbatches sequences)");
}
void check_data_parallel(const std::string& flag, const int64_t& replicas, const O& o) {
  positive(flag, replicas, o);
  BRIGADE_CHECK_VALUE(o.batch % (replicas * o.microbatches) == 0, "--batch ", o.batch,
                      " is not divisible by ", flag, " ", replicas, " x --microbatches ", o.microbatches,
                      " (each replica takes batch / replicas sequences, cut into the microbatches)");
}
void check_transport(const std::string& flag, const std::string& transport, const O&) {
  BRIGADE_CHECK_VALUE(transport == "auto" || transport == "mpi" || transport == "nccl", flag,
                      " must be auto, mpi or nccl, found '", transport, "'");
}
void check_bucket_mb(const std::string& flag, const double& mib, const O&) {
  BRIGADE_CHECK_VALUE(std::isfinite(mib) && mib * 1048576.0 >= 1.0 && mib <= 1048576.0, flag,
                      " must be a positive size in MiB (at least one byte, at most 1 TiB), found ", mib);
}
void check_timeout(const std::string& flag, const double& seconds, const O&) {
  BRIGADE_CHECK_VALUE(std::isfinite(seconds) && seconds > 0.0, flag,
                      " must be a positive number of seconds, found ", seconds);
}
// The pipeline cuts the model's layers (embed, the blocks, head) into stages x virtual chunks.
void check_virtual(const std::string& flag, const int64_t& chunks, const O& o) {
  positive(flag, chunks, o);
  const int64_t model_layers = o.layers + 2;
  BRIGADE_CHECK_VALUE(o.stages * chunks <= model_layers, "--stages ", o.stages,
                      chunks > 1 ? " x " + flag + " " + std::to_string(chunks) : std::string(), " needs ",
                      o.stages * chunks, " model chunks of at least one layer, but the model has ",
                      model_layers, " layers (embed, ", o.layers, o.layers == 1 ? " block" : " blocks",
                      ", head): use fewer stages or more --layers");
}

// A row, with T deduced from the member alone (the check may be nullptr).
template <typename T>
using Check = void (*)(const std::string& flag, const T& value, const O& all);
template <typename T>
AnyTrainOption row(const char* name, T O::*member, OnResume on_resume, HelpDefault help_default,
                   std::type_identity_t<Check<T>> check, const char* help) {
  return TrainOption<T>{name, member, help, on_resume, help_default, check};
}

constexpr OnResume kInherit = OnResume::Inherit, kPerInvocation = OnResume::PerInvocation;
constexpr HelpDefault kShown = HelpDefault::Shown, kHidden = HelpDefault::Hidden;

}  // namespace

// ---- the table --------------------------------------------------------------------------------------------

// Long because it is the table itself: one row per option of `brigade train`, in --help order; splitting it
// would only scatter the rows.
const std::vector<AnyTrainOption>& train_option_table() {
  static const std::vector<AnyTrainOption> table = {
      // name  member  --resume  --help default  check  help
      row("data", &O::data, kInherit, kHidden, nullptr,
          "UTF-8 text file to train on (default: the built-in 3-digit addition task)"),
      row("layers", &O::layers, kInherit, kShown, positive, "transformer blocks"),
      row("heads", &O::heads, kInherit, kShown, positive, "attention heads (must divide --embd)"),
      row("embd", &O::embd, kInherit, kShown, check_embd, "embedding width"),
      row("block", &O::block, kInherit, kHidden, check_block,
          "context length in characters (default: one line, 13, of the addition task; 64 with --data)"),
      row("batch", &O::batch, kInherit, kShown, positive, "sequences per step"),
      row("steps", &O::steps, kInherit, kShown, non_negative,
          "total optimizer steps (a resumed run continues up to this step)"),
      row("lr", &O::lr, kInherit, kShown, check_lr, "peak learning rate (AdamW)"),
      row("min_lr", &O::min_lr, kInherit, kShown, check_min_lr,
          "learning rate at the end of the cosine decay"),
      row("warmup", &O::warmup, kInherit, kShown, non_negative, "linear warmup steps"),
      row("weight_decay", &O::weight_decay, kInherit, kShown, check_weight_decay,
          "AdamW weight decay (matrices only)"),
      row("dropout", &O::dropout, kInherit, kShown, check_dropout, "dropout probability"),
      row("grad_clip", &O::grad_clip, kInherit, kShown, check_grad_clip,
          "clip the global gradient norm to this (0: off)"),
      row("eval_every", &O::eval_every, kInherit, kShown, non_negative,
          "evaluate every N steps (0: only at the end)"),
      row("eval_iters", &O::eval_iters, kInherit, kShown, positive, "validation batches per evaluation"),
      row("device", &O::device, kPerInvocation, kShown, check_device, "cpu, cuda or cuda:N"),
      row("threads", &O::threads, kPerInvocation, kShown, check_threads,
          "CPU threads for the kernels (OpenMP; 0: the cores, shared out among pipeline stages)"),
      row("seed", &O::seed, kInherit, kShown, nullptr, "seed of the weights, batches and dropout"),
      row("dtype", &O::dtype, kInherit, kShown, check_dtype,
          "fp32, or bf16: mixed precision (bf16 GEMM inputs, fp32 accumulation, norms, loss and master "
          "weights)"),
      row("save", &O::save, kInherit, kHidden, nullptr,
          "write a checkpoint here at the end: one safetensors file, or one shard per stage plus an "
          "index when the name ends in .index.json (run.safetensors.index.json)"),
      row("save_every", &O::save_every, kInherit, kHidden, check_save_every,
          "also checkpoint every N steps (needs --save)"),
      row("resume", &O::resume, kPerInvocation, kHidden, nullptr,
          "continue the run saved in this checkpoint (a file or an index; any --stages, --balance)"),
      row("metrics", &O::metrics, kPerInvocation, kHidden, nullptr,
          "write the run's final figures to this JSON file"),
      // The pipeline (pipeline/run/train_runner.h checks the names).
      row("stages", &O::stages, kInherit, kShown, positive,
          "pipeline stages (one thread, or one GPU stream, each); --stages 1 --microbatches 1: no pipeline"),
      row("microbatches", &O::microbatches, kInherit, kShown, check_microbatches,
          "microbatches per step (must divide --batch)"),
      row("schedule", &O::schedule, kInherit, kShown, nullptr,
          "gpipe, 1f1b, interleaved, zb-h1, zb-h2, zb-v, v-half, v-min, dualpipev or looped-bfs"),
      row("schedule_file", &O::schedule_file, kInherit, kHidden, nullptr,
          "run the schedule in this file instead of --schedule: .json (brigade's) or .csv (PyTorch's); "
          "--stages and --microbatches must be the file's"),
      row("virtual", &O::virtual_chunks, kInherit, kShown, check_virtual,
          "model chunks per stage (--schedule interleaved or looped-bfs; the V schedules hold 2)"),
      row("recompute", &O::recompute, kInherit, kShown, nullptr,
          "activation recomputation: never, always, except-last, selective (attention cores), or "
          "<policy>:<one letter per layer: n none, f full, a attention core>"),
      row("partition", &O::partition, kInherit, kShown, nullptr,
          "cut the layers into stages by params, time (profiled) or memory (profiled)"),
      row("balance", &O::balance, kInherit, kHidden, nullptr,
          "layers per stage (per chunk with --virtual), e.g. 2,2"),
      row("data_parallel", &O::data_parallel, kPerInvocation, kShown, check_data_parallel,
          "data-parallel replicas of the pipeline, one process per stage and replica: run under mpirun -np "
          "stages x data-parallel (docs/distributed.md)"),
      row("bucket_mb", &O::bucket_mb, kPerInvocation, kHidden, check_bucket_mb,
          "with --data-parallel: the largest gradient bucket in MiB; each bucket's all-reduce starts as soon "
          "as its gradients are final (docs/distributed.md)"),
      row("timeout", &O::timeout, kPerInvocation, kShown, check_timeout,
          "across processes: seconds a rank waits for a peer's message before the run fails (raise it for "
          "slow links)"),
      row("transport", &O::transport, kPerInvocation, kShown, check_transport,
          "across processes: auto, mpi or nccl (device tensors; schedules that pass the rendezvous check, "
          "docs/distributed.md)"),
      row("fail_at", &O::fail_at, kPerInvocation, kHidden, nullptr,
          "fault injection for tests: N:S:ACTION makes stage S raise an error at ACTION (F3, B0, Bi2, ...) "
          "of this invocation's N-th step (docs/distributed.md)"),
      row("devices", &O::devices, kPerInvocation, kHidden, nullptr,
          "the stages' devices: one for all (cpu, cuda:0) or one per stage (cuda:0,cuda:1)"),
      row("memory_budget", &O::memory_budget, kPerInvocation, kHidden, nullptr,
          "refuse, before any step, a plan whose predicted peak on a stage exceeds this (512MiB, 2GiB)"),
      row("trace", &O::trace, kPerInvocation, kHidden, nullptr,
          "write a Chrome trace (JSON) of one steady step, simulated beside it"),
      row("timeline", &O::timeline, kPerInvocation, kHidden, nullptr,
          "write an SVG timeline of one steady step, its simulated twin under it"),
      row("plan", &O::plan, kPerInvocation, kHidden, check_plan,
          "auto: the planner chooses --stages, --microbatches, --schedule, --virtual, --recompute and "
          "--balance (brigade plan shows its table)"),
      row("plan_devices", &O::plan_devices, kPerInvocation, kHidden, non_negative,
          "devices for --plan auto (0: the CPU's cores / --threads; one GPU)"),
  };
  return table;
}

// ---- TrainOptions -----------------------------------------------------------------------------------------

void TrainOptions::validate() const {
  for_each_train_option([&](const auto& option) {
    if (option.check != nullptr) option.check(option.flag(), this->*option.member, *this);
  });
}

bool TrainOptions::uses_pipeline() const {
  return stages > 1 || microbatches > 1 || data_parallel > 1 || !fail_at.empty() || virtual_chunks > 1 ||
         recompute != "never" || !balance.empty() || !devices.empty() || !memory_budget.empty() ||
         !trace.empty() || !timeline.empty() || !schedule_file.empty() || !plan.empty();
}

int64_t TrainOptions::resolved_block() const {
  if (block > 0) return block;
  return data.empty() ? AdditionTask().line_length() : 64;
}

std::string TrainOptions::to_json() const {
  Json j = Json::object();
  for_each_train_option([&](const auto& option) { j[option.name] = this->*option.member; });
  return j.dump();
}

TrainOptions TrainOptions::from_json(const std::string& text) {
  Json j;
  try {
    j = Json::parse(text);
  } catch (const Json::exception& e) {
    BRIGADE_THROW(ValueError, "TrainOptions.from_json: not valid JSON (", e.what(), ")");
  }
  BRIGADE_CHECK_VALUE(j.is_object(), "TrainOptions.from_json: expected a JSON object, found ", j.type_name());
  TrainOptions o;
  for_each_train_option([&](const auto& option) {
    if (!j.contains(option.name)) return;
    using T = std::decay_t<decltype(o.*option.member)>;
    const Json& v = j[option.name];
    bool ok = false;
    if constexpr (std::is_same_v<T, std::string>) {
      ok = v.is_string();
    } else if constexpr (std::is_same_v<T, double>) {
      ok = v.is_number();
    } else if constexpr (std::is_unsigned_v<T>) {
      ok = v.is_number_unsigned();
    } else {
      ok = v.is_number_integer();
    }
    BRIGADE_CHECK_VALUE(ok, "TrainOptions.from_json: field '", option.name,
                        "' has the wrong type: ", v.dump());
    o.*option.member = v.get<T>();
  });
  return o;
}

}  // namespace brigade::nn
