// Peaks measured at start-up, run context, counters and the CUDA timing loop of brigade's kernel benchmarks
// (see bench_support.h for what each counter means).
//
// CPU peaks
//   copy:    a memcpy ladder over working sets of 64 KiB, 256 KiB, ... 256 MiB (64 MiB in smoke runs),
//            split over the OpenMP threads, each thread's best short trial, summed over threads; bytes =
//            read + write, so copying S bytes counts 2 S (the kernels' convention). A CPU case is measured
//            against the rung that holds its bytes (a cache-aware roofline: nothing flushes the CPU caches
//            between calls, so a small case runs from L2/L3); the 256 MiB rung is the DRAM copy bandwidth,
//            peak_cpu_copy_bytes_per_s.
//   compute: an FMA loop (AVX2, 10 independent 8-lane chains per thread, enough to hide the FMA latency on
//            two ports) on every OpenMP thread, each thread's best ~1 ms trial, summed over threads: the
//            hardware ceiling, not a library's figure.
//            brigade's own GEMM rate at 1024^3 is recorded beside it (cpu_gemm_flops) for reference.
// GPU peaks (cuda:0)
//   copy:    cudaMemcpyAsync of 1 GiB device to device (256 MiB in smoke runs), best of five, read + write.
//   compute: cuBLAS SGEMM and cuBLAS bf16 GEMM (fp32 accumulation) at 8192^3 (4096^3 in smoke runs), best of
//            three after a warm-up: what the vendor library reaches on this device today.
#include "bench/bench_support.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string_view>
#include <thread>
#include <vector>

#include "kernels/cpu/peak_loops.h"
#include "kernels/kernels.h"
#include "nn/statistics.h"
#include "tensor/stream.h"
#include "tensor/tensor.h"

#if BRIGADE_WITH_CUDA
#include <cuda_runtime.h>

#include "kernels/cuda/matmul.h"
#include "tensor/cuda/cuda_check.h"
#endif

namespace brigade::bench {
namespace {

Peaks g_peaks;
bool g_smoke = false;
std::atomic<int> g_errors{0};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string fmt(double value) {
  std::ostringstream out;
  out.precision(4);
  out << value;
  return out.str();
}

// ---- CPU peaks -------------------------------------------------------------------------------------------

/// Copy rate (read + write bytes per second) with a working set of `bytes` (half source, half destination)
/// split over the OpenMP threads. Each thread times its own trials (no barrier inside a timing) and keeps
/// its best; the peak is the sum of the threads' bests. On a shared machine a thread's short trial often
/// runs undisturbed on a core while a team-wide timing almost never does. (For the DRAM rungs this can
/// overstate what all threads reach together, which makes pct_peak conservative.)
double measure_cpu_copy(size_t bytes, int reps, int trials) {
  const size_t half = bytes / 2;
  std::vector<unsigned char> src(half, 1), dst(half, 0);  // touched here, so no page faults are timed
  double total = 0;
#pragma omp parallel reduction(+ : total)
  {
    const size_t threads = static_cast<size_t>(omp_get_num_threads());
    const size_t id = static_cast<size_t>(omp_get_thread_num());
    const size_t chunk = (half + threads - 1) / threads;
    const size_t begin = std::min(half, id * chunk), end = std::min(half, begin + chunk);
    double best = 0;
    for (int t = 0; t < trials; ++t) {
      const auto start = std::chrono::steady_clock::now();
      for (int r = 0; r < reps; ++r) {
        std::memcpy(dst.data() + begin, src.data() + begin, end - begin);
        benchmark::ClobberMemory();
      }
      best = std::max(best, 2.0 * static_cast<double>(end - begin) * reps / seconds_since(start));
    }
    total += best;
  }
  benchmark::DoNotOptimize(dst.data());
  return total;
}

/// The copy ladder: working sets 64 KiB, 256 KiB, ... 256 MiB (64 MiB in smoke runs); many short trials
/// (about 4 MiB copied each) for the small rungs.
std::vector<std::pair<double, double>> measure_cpu_copy_ladder() {
  std::vector<std::pair<double, double>> ladder;
  const size_t largest = g_smoke ? (64u << 20) : (256u << 20);
  for (size_t bytes = 64u << 10; bytes <= largest; bytes *= 4) {
    const int reps = static_cast<int>(std::max<size_t>(1, (4u << 20) / bytes));
    const int trials = bytes >= (16u << 20) ? (g_smoke ? 2 : 6) : (g_smoke ? 10 : 60);
    ladder.push_back({static_cast<double>(bytes), measure_cpu_copy(bytes, reps, trials)});
  }
  return ladder;
}

std::string size_name(double bytes) {
  if (bytes >= (1 << 20)) return std::to_string(static_cast<int64_t>(bytes) >> 20) + "MiB";
  return std::to_string(static_cast<int64_t>(bytes) >> 10) + "KiB";
}

float fma_loop_scalar(int64_t iters) {
  float acc[8];
  for (int j = 0; j < 8; ++j) acc[j] = 0.01f * static_cast<float>(j + 1);
  for (int64_t i = 0; i < iters; ++i) {
    for (int j = 0; j < 8; ++j) acc[j] = acc[j] * 0.9999999f + 1e-7f;
  }
  return acc[0] + acc[7];
}

/// The FMA peak summed over the OpenMP threads: each thread times short trials of every FMA loop this CPU
/// runs (kernels/cpu/peak_loops.h: zmm and ymm; zmm doubles the rate on Intel's two 512-bit pipes and
/// matches ymm on Zen 4) and keeps the best of each (as in measure_cpu_copy); the peak is the faster loop's
/// sum. Names the loop used.
double measure_cpu_fma(int64_t iters, int trials, std::string* source) {
  namespace cpu = kernels::cpu;
  std::vector<cpu::PeakLoop> loops;
  for (cpu::PeakLoop loop : {cpu::PeakLoop::FmaAvx512, cpu::PeakLoop::FmaAvx2}) {
    if (cpu::peak_loop_runs(loop)) loops.push_back(loop);
  }
  if (loops.empty()) {
    *source = "scalar loop";
    double total = 0;
    float sink = 0;
#pragma omp parallel reduction(+ : total, sink)
    {
      double best = 0;
      for (int t = 0; t < trials; ++t) {
        const auto start = std::chrono::steady_clock::now();
        sink += fma_loop_scalar(iters);
        best = std::max(best, 16.0 * static_cast<double>(iters) / seconds_since(start));
      }
      total += best;
    }
    benchmark::DoNotOptimize(sink);
    return total;
  }
  std::vector<double> totals(loops.size(), 0.0);
#pragma omp parallel
  {
    for (size_t i = 0; i < loops.size(); ++i) {
#pragma omp barrier
      // (all threads on the same loop at once: a zmm loop beside a ymm one would mix the two rates)
      const double best = cpu::measure_peak_loop(loops[i], iters, trials);
#pragma omp atomic
      totals[i] += best;
    }
  }
  const size_t fastest = static_cast<size_t>(std::max_element(totals.begin(), totals.end()) - totals.begin());
  *source = std::string(cpu::peak_loop_name(loops[fastest])) + " loop";
  return totals[fastest];
}

double measure_cpu_gemm(int64_t n) {
  Generator gen(7);
  const Tensor a = randn({n, n}, kFloat32, &gen), b = randn({n, n}, kFloat32, &gen);
  benchmark::DoNotOptimize(kernels::matmul(a, b).data_ptr());  // warm-up
  double best = 0;
  for (int r = 0; r < 2; ++r) {
    const auto start = std::chrono::steady_clock::now();
    const Tensor c = kernels::matmul(a, b);
    benchmark::DoNotOptimize(c.data_ptr());
    best = std::max(best, 2.0 * static_cast<double>(n * n) * static_cast<double>(n) / seconds_since(start));
  }
  return best;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown CPU";
}

// ---- GPU peaks and timing --------------------------------------------------------------------------------

#if BRIGADE_WITH_CUDA
struct CudaTimer {
  cudaEvent_t start = nullptr, stop = nullptr;
  void* flush = nullptr;  // twice the L2 size, memset before each timed call
  size_t flush_bytes = 0;
};

CudaTimer& cuda_timer() {
  static CudaTimer timer = [] {
    CudaTimer t;
    cuda_detail::set_device(0);
    int l2 = 0;
    BRIGADE_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
    t.flush_bytes = std::max<size_t>(2 * static_cast<size_t>(l2), 8u << 20);
    BRIGADE_CUDA_CHECK(cudaMalloc(&t.flush, t.flush_bytes));
    BRIGADE_CUDA_CHECK(cudaEventCreate(&t.start));
    BRIGADE_CUDA_CHECK(cudaEventCreate(&t.stop));
    return t;
  }();
  return timer;
}

double measure_gpu_copy(size_t bytes, int reps) {
  cuda_detail::set_device(0);
  const cudaStream_t stream = cuda_detail::current_stream(0);
  void* src = nullptr;
  void* dst = nullptr;
  BRIGADE_CUDA_CHECK(cudaMalloc(&src, bytes));
  BRIGADE_CUDA_CHECK(cudaMalloc(&dst, bytes));
  CudaTimer& t = cuda_timer();
  double best = 0;
  BRIGADE_CUDA_CHECK(cudaMemsetAsync(src, 1, bytes, stream));
  BRIGADE_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, stream));
  for (int r = 0; r < reps; ++r) {
    BRIGADE_CUDA_CHECK(cudaEventRecord(t.start, stream));
    BRIGADE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
    BRIGADE_CUDA_CHECK(cudaEventRecord(t.stop, stream));
    BRIGADE_CUDA_CHECK(cudaEventSynchronize(t.stop));
    float ms = 0;
    BRIGADE_CUDA_CHECK(cudaEventElapsedTime(&ms, t.start, t.stop));
    if (ms > 0) best = std::max(best, 2.0 * static_cast<double>(bytes) / (ms / 1e3));
  }
  BRIGADE_CUDA_CHECK(cudaFree(src));
  BRIGADE_CUDA_CHECK(cudaFree(dst));
  return best;
}

double measure_cublas_gemm(int64_t n, DType dtype) {
  const Device gpu = Device::cuda(0);
  Generator gen(7);
  const TensorOptions options = TensorOptions(dtype).device(gpu);
  const Tensor a = randn({n, n}, options, &gen), b = randn({n, n}, options, &gen);
  const Tensor c = empty({n, n}, options);
  kernels::GemmArgs args;
  args.a = a.data_ptr();
  args.b = b.data_ptr();
  args.c = c.data_ptr();
  args.dtype = dtype;
  args.m = args.n = args.k = n;
  args.lda = args.ldb = args.ldc = n;
  auto call = [](void* p) { kernels::cuda::gemm_cublas(*static_cast<kernels::GemmArgs*>(p)); };
  time_cuda_once(call, &args);  // warm-up: handle, heuristics
  double best = 0;
  for (int r = 0; r < 3; ++r) {
    const double seconds = time_cuda_once(call, &args);
    if (seconds > 0)
      best = std::max(best, 2.0 * static_cast<double>(n * n) * static_cast<double>(n) / seconds);
  }
  return best;
}

std::string gpu_name() {
  cudaDeviceProp prop{};
  BRIGADE_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  return prop.name;
}
#endif

void measure_peaks() {
  const auto start = std::chrono::steady_clock::now();
  g_peaks.cpu_copy_ladder = measure_cpu_copy_ladder();
  g_peaks.cpu_copy_bytes_per_s = g_peaks.cpu_copy_ladder.back().second;
  // Short trials (~0.5 ms), best of many, for the same reason as the copy ladder.
  g_peaks.cpu_flops = measure_cpu_fma(200'000, g_smoke ? 10 : 100, &g_peaks.cpu_flops_source);
  g_peaks.cpu_gemm_flops = measure_cpu_gemm(g_smoke ? 256 : 1024);
#if BRIGADE_WITH_CUDA
  if (gpu_present()) {
    g_peaks.gpu_copy_bytes_per_s = measure_gpu_copy(g_smoke ? (256u << 20) : (1u << 30), 5);
    const int64_t n = g_smoke ? 4096 : 8192;
    g_peaks.gpu_fp32_flops = measure_cublas_gemm(n, kFloat32);
    g_peaks.gpu_bf16_flops = measure_cublas_gemm(n, kBFloat16);
  }
#endif
  benchmark::AddCustomContext("brigade_peak_seconds", fmt(seconds_since(start)));
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

std::string env_or(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value && *value ? value : fallback;
}

}  // namespace

const Peaks& peaks() {
  return g_peaks;
}
bool smoke() {
  return g_smoke;
}
bool gpu_present() {
  return cuda_compiled() && cuda_available();
}
int cuda_iterations() {
  const int fallback = g_smoke ? 2 : 10;
  const char* text = std::getenv("BRIGADE_BENCH_CUDA_ITERS");
  const int value = text ? std::atoi(text) : 0;
  return value > 0 ? value : fallback;
}

void init(int* argc, char** argv) {
  // --smoke is ours; Google Benchmark rejects flags it does not know, so take it out of argv first.
  int kept = 1;
  for (int i = 1; i < *argc; ++i) {
    if (std::string_view(argv[i]) == "--smoke") {
      g_smoke = true;
    } else {
      argv[kept++] = argv[i];
    }
  }
  *argc = kept;
  benchmark::Initialize(argc, argv);
  if (benchmark::ReportUnrecognizedArguments(*argc, argv)) std::exit(2);

  double load[3] = {0, 0, 0};
  const int got = getloadavg(load, 3);
  std::string device = cpu_model();
#if BRIGADE_WITH_CUDA
  if (gpu_present()) device += " + " + gpu_name();
#endif
  benchmark::AddCustomContext("brigade_date", utc_now());
  benchmark::AddCustomContext("brigade_commit", env_or("BRIGADE_COMMIT", "unknown"));
  benchmark::AddCustomContext("brigade_device", device);
  benchmark::AddCustomContext("brigade_gpu", gpu_present() ? "yes" : "no: " + cuda_unavailable_reason());
  benchmark::AddCustomContext("brigade_smoke", g_smoke ? "yes" : "no");
  benchmark::AddCustomContext("brigade_omp_threads", std::to_string(omp_get_max_threads()));
  benchmark::AddCustomContext("brigade_load_at_start",
                              got == 3 ? fmt(load[0]) + " " + fmt(load[1]) + " " + fmt(load[2]) : "unknown");

  measure_peaks();
  benchmark::AddCustomContext("peak_cpu_copy_bytes_per_s", fmt(g_peaks.cpu_copy_bytes_per_s));
  std::ostringstream ladder;  // "64KiB:2.1e+11 256KiB:..." (a stream: gcc 12 warns on long + chains)
  ladder.precision(4);
  for (const auto& [bytes, rate] : g_peaks.cpu_copy_ladder) ladder << size_name(bytes) << ':' << rate << ' ';
  benchmark::AddCustomContext("peak_cpu_copy_ladder_bytes_per_s", ladder.str());
  benchmark::AddCustomContext("peak_cpu_flops", fmt(g_peaks.cpu_flops));
  benchmark::AddCustomContext("peak_cpu_flops_source", g_peaks.cpu_flops_source);
  benchmark::AddCustomContext("cpu_gemm_flops_brigade", fmt(g_peaks.cpu_gemm_flops));
  if (gpu_present()) {
    benchmark::AddCustomContext("peak_gpu_copy_bytes_per_s", fmt(g_peaks.gpu_copy_bytes_per_s));
    benchmark::AddCustomContext("peak_gpu_fp32_flops", fmt(g_peaks.gpu_fp32_flops));
    benchmark::AddCustomContext("peak_gpu_bf16_flops", fmt(g_peaks.gpu_bf16_flops));
    benchmark::AddCustomContext("peak_gpu_flops_source",
                                g_smoke ? "cuBLAS GEMM 4096^3" : "cuBLAS GEMM 8192^3");
  }
}

int run_and_finish() {
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return g_errors.load() > 0 ? 1 : 0;
}

void set_counters(benchmark::State& state, const Work& work, double total_seconds, Target target) {
  const double iterations = static_cast<double>(state.iterations());
  if (total_seconds <= 0 || iterations <= 0) return;
  const double per_call = total_seconds / iterations;
  const double flop_rate = work.flops / per_call, byte_rate = work.bytes / per_call;
  state.counters["FLOP/s"] = flop_rate;
  state.counters["bytes/s"] = byte_rate;
  double compute_peak = g_peaks.cpu_flops, copy_peak = g_peaks.cpu_copy_bytes_per_s;
  std::string level;
  if (target == Target::Cpu) {
    // Cache-aware: the copy rate of the smallest ladder working set that holds this case's bytes.
    for (const auto& [bytes, rate] : g_peaks.cpu_copy_ladder) {
      if (bytes >= work.bytes) {
        copy_peak = rate;
        level.assign("@").append(size_name(bytes));  // not "@" + ...: gcc 12's false -Wrestrict
        break;
      }
    }
  } else {
    compute_peak = target == Target::CudaBf16 ? g_peaks.gpu_bf16_flops : g_peaks.gpu_fp32_flops;
    copy_peak = g_peaks.gpu_copy_bytes_per_s;
  }
  const double t_compute = compute_peak > 0 ? work.flops / compute_peak : 0;
  const double t_memory = copy_peak > 0 ? work.bytes / copy_peak : 0;
  const double t_roofline = std::max(t_compute, t_memory);
  state.counters["pct_peak"] = 100.0 * t_roofline / per_call;
  state.SetLabel(t_compute >= t_memory ? std::string("compute") : std::string("memory").append(level));
}

void report_exception(benchmark::State& state, const std::exception& e, bool unsupported) {
  if (!unsupported) g_errors.fetch_add(1);
  state.SkipWithError((std::string(unsupported ? "unsupported: " : "error: ") + e.what()).c_str());
}

#if BRIGADE_WITH_CUDA
double time_cuda_once(void (*call)(void*), void* context) {
  CudaTimer& t = cuda_timer();
  cuda_detail::set_device(0);
  const cudaStream_t stream = cuda_detail::current_stream(0);
  BRIGADE_CUDA_CHECK(cudaMemsetAsync(t.flush, 0, t.flush_bytes, stream));
  BRIGADE_CUDA_CHECK(cudaEventRecord(t.start, stream));
  call(context);
  BRIGADE_CUDA_CHECK(cudaEventRecord(t.stop, stream));
  BRIGADE_CUDA_CHECK(cudaEventSynchronize(t.stop));
  float ms = 0;
  BRIGADE_CUDA_CHECK(cudaEventElapsedTime(&ms, t.start, t.stop));
  return ms / 1e3;
}
#endif

}  // namespace brigade::bench
