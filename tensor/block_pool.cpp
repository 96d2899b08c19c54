#include "tensor/block_pool.h"

#include <algorithm>
#include <tuple>

namespace brigade::detail {

namespace {
size_t round_up(size_t value, size_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}
}  // namespace

// Free lists are ordered by (stream, size, address): lower_bound({stream, size, 0}) is the smallest free
// block of that stream that fits (best fit), the lowest address among equals.
bool BlockPool::BlockLess::operator()(const Block* a, const Block* b) const {
  return std::make_tuple(a->stream, a->size, reinterpret_cast<uintptr_t>(a->ptr)) <
         std::make_tuple(b->stream, b->size, reinterpret_cast<uintptr_t>(b->ptr));
}

BlockPool::BlockPool(SegmentSource& source) : source_(source) {}

BlockPool::~BlockPool() {
  for (auto& entry : pending_) source_.release_event(entry.first);
  for (Block* head : segments_) {
    size_t bytes = 0;
    void* base = head->ptr;
    for (Block* b = head; b != nullptr;) {
      bytes += b->size;
      Block* next = b->next;
      delete b;
      b = next;
    }
    source_.free_segment(base, bytes);
  }
}

size_t BlockPool::round_size(size_t nbytes) {
  return nbytes < kMinBlockSize ? kMinBlockSize : round_up(nbytes, kMinBlockSize);
}

size_t BlockPool::segment_size(size_t size) {
  return size <= kSmallSize ? kSmallSegment : round_up(size, kLargeRound);
}

Block* BlockPool::allocate(size_t nbytes, StreamId stream) {
  if (nbytes > kMaxRequest) return nullptr;
  process_events();
  const size_t size = round_size(nbytes);
  const bool small = size <= kSmallSize;

  Block* block = find_free(size, stream, small);
  if (block == nullptr) block = new_segment(size, stream, small);
  if (block == nullptr) {
    // Out of memory: cached segments of every stream are fair game, then one more try.
    release_free_segments();
    block = new_segment(size, stream, small);
    if (block == nullptr) return nullptr;
  }

  block = split(block, size);
  block->allocated = true;
  block->requested = nbytes;
  block->used_on.clear();
  allocated_bytes_ += block->size;
  return block;
}

Block* BlockPool::find_free(size_t size, StreamId stream, bool small) {
  FreeList& list = free_list(small);
  Block key;
  key.stream = stream;
  key.size = size;
  key.ptr = nullptr;
  auto it = list.lower_bound(&key);
  if (it == list.end() || (*it)->stream != stream) return nullptr;
  Block* block = *it;
  list.erase(it);
  return block;
}

Block* BlockPool::new_segment(size_t size, StreamId stream, bool small) {
  const size_t bytes = segment_size(size);
  void* ptr = source_.allocate_segment(bytes);
  if (ptr == nullptr) return nullptr;
  auto* block = new Block;
  block->ptr = ptr;
  block->size = bytes;
  block->stream = stream;
  block->small = small;
  segments_.insert(block);
  reserved_bytes_ += bytes;
  ++segment_count_;
  return block;
}

// Keeps the front `size` bytes in `block` and returns the rest to the free list when it is worth keeping
// apart (see the header). `block` is not in any free list when this is called.
Block* BlockPool::split(Block* block, size_t size) {
  const size_t remaining = block->size - size;
  const bool worth_it = block->small ? remaining >= kMinBlockSize : remaining > kSmallSize;
  if (!worth_it) return block;
  auto* rest = new Block;
  rest->ptr = static_cast<char*>(block->ptr) + size;
  rest->size = remaining;
  rest->stream = block->stream;
  rest->small = block->small;
  rest->prev = block;
  rest->next = block->next;
  if (rest->next != nullptr) rest->next->prev = rest;
  block->next = rest;
  block->size = size;
  free_list(rest->small).insert(rest);
  return block;
}

void BlockPool::free(Block* block) {
  if (block == nullptr) return;
  // One event per other stream that used the block: reuse on the owning stream must wait for that work.
  for (StreamId other : block->used_on) {
    pending_.emplace_back(source_.record_event(other), block);
    ++block->pending_events;
  }
  block->used_on.clear();
  if (block->pending_events == 0) return_to_free_list(block);
}

void BlockPool::record_stream(Block* block, StreamId stream) {
  if (block == nullptr || stream == block->stream) return;
  if (std::find(block->used_on.begin(), block->used_on.end(), stream) == block->used_on.end()) {
    block->used_on.push_back(stream);
  }
}

void BlockPool::process_events() {
  // Events of different streams complete in any order, so look at every one (the list is short).
  auto done = [this](const std::pair<void*, Block*>& entry) {
    if (!source_.event_completed(entry.first)) return false;
    source_.release_event(entry.first);
    Block* block = entry.second;
    if (--block->pending_events == 0) return_to_free_list(block);
    return true;
  };
  pending_.erase(std::remove_if(pending_.begin(), pending_.end(), done), pending_.end());
}

// Marks the block free and merges it with free neighbours of its segment (neighbours in the segment always
// belong to the same stream, since a segment does). The merged block goes into the free list.
void BlockPool::return_to_free_list(Block* block) {
  allocated_bytes_ -= block->size;
  block->allocated = false;
  block->requested = 0;
  FreeList& list = free_list(block->small);
  if (Block* next = block->next; next != nullptr && !next->allocated) {
    list.erase(next);
    block->size += next->size;
    block->next = next->next;
    if (block->next != nullptr) block->next->prev = block;
    delete next;
  }
  if (Block* prev = block->prev; prev != nullptr && !prev->allocated) {
    list.erase(prev);
    prev->size += block->size;
    prev->next = block->next;
    if (prev->next != nullptr) prev->next->prev = prev;
    delete block;
    block = prev;
  }
  list.insert(block);
}

void BlockPool::release_free_segments() {
  for (FreeList* list : {&small_free_, &large_free_}) {
    for (auto it = list->begin(); it != list->end();) {
      Block* block = *it;
      if (block->prev != nullptr || block->next != nullptr) {
        ++it;
        continue;
      }
      it = list->erase(it);
      segments_.erase(block);
      source_.free_segment(block->ptr, block->size);
      reserved_bytes_ -= block->size;
      --segment_count_;
      delete block;
    }
  }
}

void BlockPool::empty_cache() {
  process_events();
  release_free_segments();
}

}  // namespace brigade::detail
