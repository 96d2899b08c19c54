// Memory accounting shared by all allocators. One mutex guards a small table keyed by (device, scope id);
// allocations are coarse (tensors), so contention is negligible next to the allocation itself.
#include "tensor/memory.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace brigade {

namespace {

struct DeviceKey {
  int kind, index;
  bool operator<(const DeviceKey& o) const { return kind != o.kind ? kind < o.kind : index < o.index; }
};
DeviceKey key_of(const Device& d) { return {static_cast<int>(d.kind), d.index}; }

struct Accounting {
  std::mutex mutex;
  std::map<DeviceKey, MemoryStats> devices;
  std::map<std::pair<DeviceKey, int>, MemoryStats> scopes;  // (device, scope id) -> stats
  std::unordered_map<std::string, int> scope_ids;           // tag -> id (id 0 means "no scope")
  std::vector<std::string> scope_tags{""};
};

Accounting& accounting() {
  static Accounting* instance = new Accounting();  // never destroyed: storages may be freed at exit
  return *instance;
}

thread_local int current_scope_id = 0;

int scope_id_for(Accounting& acc, const std::string& tag) {
  auto it = acc.scope_ids.find(tag);
  if (it != acc.scope_ids.end()) return it->second;
  int id = static_cast<int>(acc.scope_tags.size());
  acc.scope_tags.push_back(tag);
  acc.scope_ids.emplace(tag, id);
  return id;
}

void add_in_use(MemoryStats& s, int64_t bytes) {
  s.in_use_bytes += bytes;
  s.peak_bytes = std::max(s.peak_bytes, s.in_use_bytes);
}

}  // namespace

MemoryStats memory_stats(const Device& device) {
  Accounting& acc = accounting();
  std::lock_guard<std::mutex> lock(acc.mutex);
  return acc.devices[key_of(device)];
}

void reset_peak_memory(const Device& device) {
  Accounting& acc = accounting();
  std::lock_guard<std::mutex> lock(acc.mutex);
  DeviceKey key = key_of(device);
  MemoryStats& s = acc.devices[key];
  s.peak_bytes = s.in_use_bytes;
  for (auto& [scope_key, stats] : acc.scopes) {
    if (!(scope_key.first < key) && !(key < scope_key.first)) stats.peak_bytes = stats.in_use_bytes;
  }
}

MemoryStats scope_memory_stats(const Device& device, const std::string& tag) {
  Accounting& acc = accounting();
  std::lock_guard<std::mutex> lock(acc.mutex);
  auto id = acc.scope_ids.find(tag);
  if (id == acc.scope_ids.end()) return {};
  return acc.scopes[{key_of(device), id->second}];
}

void reset_scope_peak(const Device& device, const std::string& tag) {
  Accounting& acc = accounting();
  std::lock_guard<std::mutex> lock(acc.mutex);
  auto id = acc.scope_ids.find(tag);
  if (id == acc.scope_ids.end()) return;
  MemoryStats& s = acc.scopes[{key_of(device), id->second}];
  s.peak_bytes = s.in_use_bytes;
}

MemoryScope::MemoryScope(const std::string& tag) : previous_id_(current_scope_id) {
  Accounting& acc = accounting();
  std::lock_guard<std::mutex> lock(acc.mutex);
  current_scope_id = scope_id_for(acc, tag);
}

MemoryScope::~MemoryScope() { current_scope_id = previous_id_; }

int MemoryScope::current_id() { return current_scope_id; }

namespace detail {

void record_allocation(const Device& device, int scope_id, int64_t bytes) {
  Accounting& acc = accounting();
  std::lock_guard<std::mutex> lock(acc.mutex);
  MemoryStats& s = acc.devices[key_of(device)];
  add_in_use(s, bytes);
  ++s.allocations;
  ++s.total_allocations;
  if (scope_id != 0) {
    MemoryStats& sc = acc.scopes[{key_of(device), scope_id}];
    add_in_use(sc, bytes);
    ++sc.allocations;
    ++sc.total_allocations;
  }
}

void record_free(const Device& device, int scope_id, int64_t bytes) {
  Accounting& acc = accounting();
  std::lock_guard<std::mutex> lock(acc.mutex);
  MemoryStats& s = acc.devices[key_of(device)];
  s.in_use_bytes -= bytes;
  --s.allocations;
  if (scope_id != 0) {
    MemoryStats& sc = acc.scopes[{key_of(device), scope_id}];
    sc.in_use_bytes -= bytes;
    --sc.allocations;
  }
}

void record_reserved(const Device& device, int64_t delta_bytes) {
  Accounting& acc = accounting();
  std::lock_guard<std::mutex> lock(acc.mutex);
  acc.devices[key_of(device)].reserved_bytes += delta_bytes;
}

}  // namespace detail
}  // namespace brigade
