// sim/serving/prefix_cache.cpp — leading-run matches over two tiers, references, LRU eviction.
#include "sim/serving/prefix_cache.hpp"

#include <algorithm>
#include <stdexcept>

namespace shardsim {

PrefixCache::Hit PrefixCache::find(std::span<const std::uint64_t> blocks, int limit) const {
  Hit h;
  const int n = std::min(limit, static_cast<int>(blocks.size()));
  for (int i = 0; i < n; ++i) {
    const std::uint64_t id = blocks[static_cast<std::size_t>(i)];
    if (blocks_.find(id) != blocks_.end()) {
      ++h.blocks;
    } else if (host_.find(id) != host_.end()) {
      ++h.blocks;
      ++h.from_host;
    } else {
      break;
    }
  }
  return h;
}

void PrefixCache::hold(std::span<const std::uint64_t> blocks, int n) {
  for (int i = 0; i < n && i < static_cast<int>(blocks.size()); ++i) {
    const std::uint64_t id = blocks[static_cast<std::size_t>(i)];
    if (auto h = host_.find(id); h != host_.end()) {  // back to GPU memory
      host_lru_.erase(h->second);
      host_.erase(h);
    }
    auto [it, added] = blocks_.try_emplace(id);
    if (!added && it->second.refs == 0) lru_.erase(it->second.lru);
    ++it->second.refs;
  }
}

// Tail first (vLLM frees a request's blocks in reverse order): a prompt's first block ends up the
// most recently used of its run, so eviction takes prompts' tails before the prefixes they share.
void PrefixCache::release(std::span<const std::uint64_t> blocks, int n) {
  for (int i = std::min(n, static_cast<int>(blocks.size())) - 1; i >= 0; --i) {
    auto it = blocks_.find(blocks[static_cast<std::size_t>(i)]);
    if (it == blocks_.end() || it->second.refs <= 0) throw std::logic_error("PrefixCache::release: a block not held");
    if (--it->second.refs == 0) {
      lru_.push_front(it->first);
      it->second.lru = lru_.begin();
    }
  }
}

void PrefixCache::trim(long tokens) {
  const long host_blocks = host_tokens_ / std::max(1, block_tokens_);
  while (!lru_.empty() && evictable_tokens() > tokens) {
    const std::uint64_t id = lru_.back();
    lru_.pop_back();
    blocks_.erase(id);
    ++evicted_;
    if (host_blocks <= 0) continue;
    host_lru_.push_front(id);
    host_[id] = host_lru_.begin();
    while (static_cast<long>(host_lru_.size()) > host_blocks) {
      host_.erase(host_lru_.back());
      host_lru_.pop_back();
      ++dropped_;
    }
  }
}

}  // namespace shardsim
