// sim/serving/prefix_cache.hpp — an attention group's prefix cache: the prompt blocks whose KV it
// keeps after the sequences that computed them, found again by the next prompt that starts alike.
//
// Owns: PrefixCache. A prompt is a run of blocks, each named by an id that stands for the whole
// prefix up to and including it (Mooncake's `hash_ids`; vLLM and SGLang hash a block with its
// parent's hash the same way), so a prompt's hit is the longest *leading* run of its ids the cache
// holds. The rules are those of vLLM's block pool and SGLang's radix cache (docs/engines.md,
// "Prefix caching"): a block enters the cache once a sequence has computed it (its prompt's
// prefill is done), running sequences hold references to their blocks, a block nobody references
// stays cached in the free part of KV memory and is evicted least-recently-used first when that
// memory is needed (`trim`). Referenced blocks live in their sequences' own KV (the serving loop
// counts a sequence's whole context, shared prefix included: memory that concurrent sequences
// share is counted per sequence — conservative where prompts overlap while running).
// Units: blocks and tokens. Thread-safety: one per attention group of one replica run.
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>

namespace shardsim {

class PrefixCache {
 public:
  explicit PrefixCache(int block_tokens) : block_tokens_(block_tokens) {}

  int block_tokens() const { return block_tokens_; }
  // The longest leading run of `blocks` the cache holds (blocks).
  int match(std::span<const std::uint64_t> blocks) const;
  // References the first `n` of `blocks` for a sequence: cached ones are taken out of eviction's
  // reach, missing ones are added (computed by that sequence), both most recently used.
  void hold(std::span<const std::uint64_t> blocks, int n);
  // Drops a sequence's references to the first `n` of `blocks` (those it held); a block nobody
  // references any more stays cached, evictable, most recently used.
  void release(std::span<const std::uint64_t> blocks, int n);
  // Tokens of cached blocks nobody references (they occupy free KV memory).
  long evictable_tokens() const { return static_cast<long>(lru_.size()) * block_tokens_; }
  // Evicts unreferenced blocks, least recently used first, until at most `tokens` remain.
  void trim(long tokens);
  long evicted_blocks() const { return evicted_; }

 private:
  struct Entry {
    int refs = 0;
    std::list<std::uint64_t>::iterator lru;  // valid when refs == 0
  };
  int block_tokens_;
  std::unordered_map<std::uint64_t, Entry> blocks_;
  std::list<std::uint64_t> lru_;  // unreferenced blocks, most recently used first
  long evicted_ = 0;
};

}  // namespace shardsim
