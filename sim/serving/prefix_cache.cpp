// sim/serving/prefix_cache.cpp — leading-run matches, references and LRU eviction of cached blocks.
#include "sim/serving/prefix_cache.hpp"

#include <algorithm>
#include <stdexcept>

namespace shardsim {

int PrefixCache::match(std::span<const std::uint64_t> blocks) const {
  int n = 0;
  for (std::uint64_t id : blocks) {
    if (blocks_.find(id) == blocks_.end()) break;
    ++n;
  }
  return n;
}

void PrefixCache::hold(std::span<const std::uint64_t> blocks, int n) {
  for (int i = 0; i < n && i < static_cast<int>(blocks.size()); ++i) {
    auto [it, added] = blocks_.try_emplace(blocks[static_cast<std::size_t>(i)]);
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
  while (!lru_.empty() && evictable_tokens() > tokens) {
    blocks_.erase(lru_.back());
    lru_.pop_back();
    ++evicted_;
  }
}

}  // namespace shardsim
