// Compiled grammars shared by text: the server compiles each request's
// grammar (from its schema, tools or GBNF), and requests with the same
// constraint should hold the same Grammar, so that their sequences share
// states and masks (grammar/mask_cache.h is keyed per Grammar). The most
// recently used grammars are kept, up to a count and a total of text bytes;
// thread-safe (HTTP handlers compile concurrently).
#pragma once

#include <memory>
#include <string_view>

#include "grammar/grammar.h"

namespace pagellm {

// Grammar::parse(text, start), compiled once per distinct (text, start)
// while it stays among the recently used; throws GrammarError as parse does
// (errors are not cached).
std::shared_ptr<const Grammar> compile_grammar_shared(std::string_view text,
                                                      std::string_view start = "root");

struct GrammarCacheStats {
  size_t entries = 0, text_bytes = 0;
  uint64_t hits = 0, compiles = 0;
};
GrammarCacheStats grammar_cache_stats();

}  // namespace pagellm
