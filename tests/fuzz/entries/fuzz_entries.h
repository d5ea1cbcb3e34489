// Fuzz entry points: each takes one input of arbitrary bytes and runs it
// through a part of pagellm that reads untrusted data. An input may be
// refused with the documented error (pagellm::Error and its subclasses),
// which the entry swallows; anything else (a crash, a sanitizer report, an
// exception of another type, a broken invariant, which aborts) is a bug.
//
// The same functions back the libFuzzer binaries (fuzz_main.cpp, built with
// PAGELLM_FUZZ=ON by scripts/fuzz.sh) and the GoogleTest that replays the
// committed corpora and crash reproducers (fuzz_regression_test.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace pagellm::fuzz {

using EntryFn = int (*)(const uint8_t* data, size_t size);

// A GGUF file: parsed and validated, its metadata and tensors walked; if it
// is a model, loaded (hyper-parameters, weights) and run for two tokens; if
// it has a vocabulary, a tokenizer built and used.
int gguf(const uint8_t* data, size_t size);
// A pipeline step message from another MPI rank, decoded against a stage's
// limits: what is accepted addresses only the stage's pools and survives an
// encode/decode round trip.
int step_message(const uint8_t* data, size_t size);
// Byte 0 picks a shipped vocabulary (tests/data), byte 1 the flags
// (add_special, parse_special); the rest is text to encode, decode and
// stream-detokenize. Every id must be in the vocabulary.
int tokenizer(const uint8_t* data, size_t size);
// A chat template source, optionally followed by a NUL byte and a JSON array
// of OpenAI-style messages (default: a short conversation), parsed and
// rendered under tight limits.
int chat_template(const uint8_t* data, size_t size);
// Byte 0 picks the endpoint (even: chat, odd: completions); the rest is a
// request body, parsed and validated as the server does (no model: the
// shipped model's vocabulary and chat template, its 512-token context).
// Refusals must be 4xx ApiErrors; what is accepted must be runnable.
int server_request(const uint8_t* data, size_t size);
// A --device-map string (MoE "experts:" entries too), parsed, resolved and
// planned on a synthetic model with experts; accepted plans must stay within
// their budgets.
int device_map(const uint8_t* data, size_t size);
// A GBNF grammar, then optionally a NUL byte and text to match: parsed,
// compiled, matched byte by byte, masks checked against the matcher.
int grammar(const uint8_t* data, size_t size);
// A JSON Schema: converted to GBNF (or refused), which must compile.
int json_schema(const uint8_t* data, size_t size);
// A model reply (byte 0: the format) through the tool-call parser.
int tool_calls(const uint8_t* data, size_t size);
// A POST /v1/responses body: parsed (one stored response, "resp_known"),
// prepared on the shipped model, and written out as a response and events.
int responses_request(const uint8_t* data, size_t size);
// Byte 0 odd: a count_tokens body, else a POST /v1/messages body; parsed,
// prepared (or counted) on the shipped model; refusals must be 400s.
int anthropic_request(const uint8_t* data, size_t size);
// A POST /v1/embeddings body: parsed, prepared on the shipped model, and the
// response written; refusals must be 400s.
int embeddings_request(const uint8_t* data, size_t size);

// llama-server's endpoints (/tokenize, /detokenize, /apply-template, /infill):
// byte 0 picks the endpoint and, for /infill, a vocabulary with or without
// FIM tokens; refusals must be 400s, infill prompts well formed.
int llama_request(const uint8_t* data, size_t size);

// A block file of the prefix cache's disk tier (--cache-dir), parsed and
// checked; what is accepted must encode back to the same bytes and match
// only its own header.
int block_file(const uint8_t* data, size_t size);

struct Target {
  std::string name;  // folder name under tests/fuzz/corpus and tests/fuzz/regressions
  EntryFn fn;
};
const std::vector<Target>& targets();

// Aborts with a message: an invariant of the code under test does not hold.
[[noreturn]] void violated(const char* what);

}  // namespace pagellm::fuzz
