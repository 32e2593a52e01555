// sim/serving/prefix_cache.hpp — an attention group's prefix cache: the prompt blocks whose KV it
// keeps after the sequences that computed them, found again by the next prompt that starts alike,
// in GPU memory and, optionally, in a host-memory tier below it.
//
// Owns: PrefixCache. A prompt is a run of blocks, each named by an id that stands for the whole
// prefix up to and including it (Mooncake's `hash_ids`; vLLM and SGLang hash a block with its
// parent's hash the same way), so a prompt's hit is the longest *leading* run of its ids the cache
// holds. The rules are those of vLLM's block pool and SGLang's radix cache (docs/engines.md,
// "Prefix caching"): a block enters the cache once a sequence has computed it, running sequences
// hold references to their blocks, a block nobody references stays cached in the free part of KV
// memory and is evicted least-recently-used first when that memory is needed (`trim`). With a
// host tier (SGLang's HiCache, vLLM's KV offloading, LMCache), a block evicted from GPU memory
// moves there instead of being dropped, the host tier drops its own least recently used beyond
// its capacity, and a hit there moves the block back (the serving loop charges the copy).
// Referenced blocks live in their sequences' own KV (the serving loop counts a sequence's whole
// context, shared prefix included: memory that concurrent sequences share is counted per
// sequence — conservative where prompts overlap while running).
// Units: blocks and tokens. Thread-safety: one per attention group of one replica run.
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>

namespace shardsim {

class PrefixCache {
 public:
  // `host_tokens`: the host tier's capacity (0: none).
  explicit PrefixCache(int block_tokens, long host_tokens = 0) : block_tokens_(block_tokens), host_tokens_(host_tokens) {}

  int block_tokens() const { return block_tokens_; }
  struct Hit {
    int blocks = 0;     // the leading run found, GPU and host tiers together
    int from_host = 0;  // of them, in the host tier
  };
  // The longest leading run of the first `limit` of `blocks` the cache holds (either tier).
  Hit find(std::span<const std::uint64_t> blocks, int limit) const;
  int match(std::span<const std::uint64_t> blocks) const { return find(blocks, static_cast<int>(blocks.size())).blocks; }
  // References the first `n` of `blocks` for a sequence: cached ones are taken out of eviction's
  // reach (host ones moved back to GPU memory), missing ones are added (computed by that sequence).
  void hold(std::span<const std::uint64_t> blocks, int n);
  // Drops a sequence's references to the first `n` of `blocks` (those it held); a block nobody
  // references any more stays cached, evictable, most recently used.
  void release(std::span<const std::uint64_t> blocks, int n);
  // Tokens of cached GPU blocks nobody references (they occupy free KV memory).
  long evictable_tokens() const { return static_cast<long>(lru_.size()) * block_tokens_; }
  // Evicts unreferenced GPU blocks, least recently used first, until at most `tokens` remain:
  // to the host tier when there is one (which drops its least recently used beyond its capacity).
  void trim(long tokens);
  long evicted_blocks() const { return evicted_; }       // from GPU memory
  long host_dropped_blocks() const { return dropped_; }  // from the host tier

 private:
  struct Entry {
    int refs = 0;
    std::list<std::uint64_t>::iterator lru;  // valid when refs == 0
  };
  int block_tokens_;
  long host_tokens_;
  std::unordered_map<std::uint64_t, Entry> blocks_;
  std::list<std::uint64_t> lru_;  // unreferenced GPU blocks, most recently used first
  std::unordered_map<std::uint64_t, std::list<std::uint64_t>::iterator> host_;
  std::list<std::uint64_t> host_lru_;  // host blocks, most recently used first
  long evicted_ = 0, dropped_ = 0;
};

}  // namespace shardsim
