// Streams and events for both backends. CPU streams run work synchronously, so a CPU event is complete the
// moment it is recorded; what the two backends share is the "recorded" flag and its condition variable,
// which gives every Event the block-until-recorded rule of tensor/stream.h.
#include "tensor/stream.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>

#include "tensor/error.h"

#if BRIGADE_WITH_CUDA
#include "tensor/cuda/cuda_check.h"
#endif

namespace brigade {

// ---- Stream ----------------------------------------------------------------------------------------------

struct Stream::Handle {
  void* cuda_stream = nullptr;  // cudaStream_t for CUDA streams
  int id = 0;
  Device device;
  ~Handle() {
#if BRIGADE_WITH_CUDA
    if (cuda_stream != nullptr) cudaStreamDestroy(static_cast<cudaStream_t>(cuda_stream));
#endif
  }
};

namespace {
std::atomic<int> next_stream_id{1};
// The current stream per device for this thread; absent means the device's default stream.
std::map<std::pair<int, int>, Stream>& current_map() {
  thread_local std::map<std::pair<int, int>, Stream> current_streams;
  return current_streams;
}
std::pair<int, int> key_of(const Device& d) { return {static_cast<int>(d.kind), d.index}; }
}  // namespace

Stream::Stream(Device device) : device_(device) {}

Stream Stream::create(const Device& device) {
  check_device_exists(device, "Stream::create");
  Stream stream(device);
  stream.handle_ = std::make_shared<Handle>();
  stream.handle_->id = next_stream_id++;
  stream.handle_->device = device;
#if BRIGADE_WITH_CUDA
  if (device.is_cuda()) {
    cuda_detail::set_device(device.index);
    cudaStream_t s = nullptr;
    BRIGADE_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    stream.handle_->cuda_stream = s;
  }
#endif
  return stream;
}

Stream Stream::current(const Device& device) {
  auto& map = current_map();
  auto it = map.find(key_of(device));
  return it == map.end() ? Stream(device) : it->second;
}

void* Stream::native_handle() const { return handle_ ? handle_->cuda_stream : nullptr; }

int Stream::id() const { return handle_ ? handle_->id : 0; }

void Stream::synchronize() const {
#if BRIGADE_WITH_CUDA
  if (device_.is_cuda()) {
    cuda_detail::set_device(device_.index);
    BRIGADE_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(native_handle())));
  }
#endif
}

void Stream::wait(const Event& event) const {
  event.wait_recorded();  // the rule: never wait on an event nobody has recorded yet
#if BRIGADE_WITH_CUDA
  if (event.device().is_cuda()) {
    if (device_.is_cuda()) {
      cuda_detail::set_device(device_.index);
      BRIGADE_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(native_handle()),
                                             static_cast<cudaEvent_t>(event.native_handle()), 0));
    } else {
      event.synchronize();  // a CPU stream "waits" by blocking its thread
    }
  }
#endif
  // A CPU event is complete once recorded: nothing more to wait for.
}

void Stream::wait(const Stream& other) const {
  if (device_.is_cpu() && other.device_.is_cpu()) return;
  Event event;
  event.record(other);
  wait(event);
}

StreamGuard::StreamGuard(const Stream& stream) : previous_(Stream::current(stream.device())) {
  current_map()[key_of(stream.device())] = stream;
#if BRIGADE_WITH_CUDA
  if (stream.device().is_cuda()) cuda_detail::set_device(stream.device().index);
#endif
}

StreamGuard::~StreamGuard() { current_map()[key_of(previous_.device())] = previous_; }

// ---- Event -----------------------------------------------------------------------------------------------

struct Event::State {
  std::mutex mutex;
  std::condition_variable recorded_cv;
  bool recorded = false;
  bool enable_timing = false;
  Device device = Device::cpu();
  std::chrono::steady_clock::time_point cpu_time;
  void* cuda_event = nullptr;  // cudaEvent_t, created on the first CUDA record
  int cuda_event_device = -1;

  ~State() {
#if BRIGADE_WITH_CUDA
    if (cuda_event != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(cuda_event));
#endif
  }
};

Event::Event(bool enable_timing) : state_(std::make_shared<State>()) { state_->enable_timing = enable_timing; }

void Event::record(const Stream& stream) {
#if BRIGADE_WITH_CUDA
  if (stream.device().is_cuda()) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    cuda_detail::set_device(stream.device().index);
    if (state_->cuda_event != nullptr && state_->cuda_event_device != stream.device().index) {
      cudaEventDestroy(static_cast<cudaEvent_t>(state_->cuda_event));
      state_->cuda_event = nullptr;
    }
    if (state_->cuda_event == nullptr) {
      cudaEvent_t e = nullptr;
      BRIGADE_CUDA_CHECK(cudaEventCreateWithFlags(&e, state_->enable_timing ? cudaEventDefault
                                                                              : cudaEventDisableTiming));
      state_->cuda_event = e;
      state_->cuda_event_device = stream.device().index;
    }
    BRIGADE_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(state_->cuda_event),
                                       static_cast<cudaStream_t>(stream.native_handle())));
  }
#endif
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->recorded = true;
    state_->device = stream.device();
    state_->cpu_time = std::chrono::steady_clock::now();
  }
  state_->recorded_cv.notify_all();
}

bool Event::is_recorded() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->recorded;
}

bool Event::query() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (!state_->recorded) return false;
#if BRIGADE_WITH_CUDA
  if (state_->device.is_cuda()) {
    cudaError_t status = cudaEventQuery(static_cast<cudaEvent_t>(state_->cuda_event));
    if (status == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    BRIGADE_CUDA_CHECK(status);
  }
#endif
  return true;
}

void Event::wait_recorded() const {
  std::unique_lock<std::mutex> lock(state_->mutex);
  state_->recorded_cv.wait(lock, [&] { return state_->recorded; });
}

void Event::synchronize() const {
  wait_recorded();
#if BRIGADE_WITH_CUDA
  if (device().is_cuda()) BRIGADE_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(native_handle())));
#endif
}

double Event::elapsed_ms(const Event& end) const {
  synchronize();
  end.synchronize();
  Device d0 = device(), d1 = end.device();
  BRIGADE_CHECK_DEVICE(d0.kind == d1.kind, "Event::elapsed_ms: events recorded on ", d0.str(), " and ", d1.str());
#if BRIGADE_WITH_CUDA
  if (d0.is_cuda()) {
    BRIGADE_CHECK(state_->enable_timing && end.state_->enable_timing,
                  "Event::elapsed_ms: CUDA events need Event(/*enable_timing=*/true)");
    float ms = 0;
    BRIGADE_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(native_handle()),
                                            static_cast<cudaEvent_t>(end.native_handle())));
    return ms;
  }
#endif
  std::lock_guard<std::mutex> lock_a(state_->mutex);
  auto start_time = state_->cpu_time;
  std::chrono::steady_clock::time_point end_time;
  if (end.state_ == state_) {
    end_time = start_time;
  } else {
    std::lock_guard<std::mutex> lock_b(end.state_->mutex);
    end_time = end.state_->cpu_time;
  }
  return std::chrono::duration<double, std::milli>(end_time - start_time).count();
}

Device Event::device() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->device;
}

void* Event::native_handle() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->cuda_event;
}

// ---- CUDA helpers used by kernels ------------------------------------------------------------------------
#if BRIGADE_WITH_CUDA
namespace cuda_detail {

cudaStream_t current_stream(int device_index) {
  return static_cast<cudaStream_t>(Stream::current(Device::cuda(device_index)).native_handle());
}

void set_device(int device_index) {
  thread_local int current = -1;
  if (current == device_index) return;
  BRIGADE_CUDA_CHECK(cudaSetDevice(device_index));
  current = device_index;
}

}  // namespace cuda_detail
#endif

}  // namespace brigade
