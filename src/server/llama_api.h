// llama-server's own endpoints, in its request and response shapes, for
// clients written against it:
//
//   POST /tokenize        {content, add_special, parse_special, with_pieces} -> {tokens}
//   POST /detokenize      {tokens} -> {content}
//   POST /apply-template  a chat request -> {prompt}: the text /v1/chat/completions renders
//   GET  /props           model path and alias, context, chat template, default
//                         generation settings, total_slots, build info
//   GET  /slots           the sequences in the engine (only with `serve --slots`)
//   POST /infill          fill-in-the-middle: the prompt built from input_prefix,
//                         input_suffix, input_extra and prompt as llama-server
//                         builds it, run like /v1/completions; the reply (and
//                         stream) in llama-server's /completion shape
//
// Parsing follows openai_request.h: strict types (400 naming the field),
// unknown fields ignored. Everything here is a pure function of the body and
// the loaded model, so the fuzz targets run it without a server.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/http_server.h"
#include "server/openai_request.h"
#include "server/session_output.h"

namespace pagellm {

class Tokenizer;
class ChatPrompt;
struct EngineStats;

struct TokenizeRequest {
  std::string content;
  bool add_special = false;   // llama-server's defaults
  bool parse_special = true;
  bool with_pieces = false;
};
TokenizeRequest parse_tokenize_request(const std::string& body);
// {"tokens": [ids]} or {"tokens": [{"id", "piece"}]}; a piece that is not
// valid UTF-8 is a list of its bytes.
nlohmann::ordered_json tokenize_response(const TokenizeRequest& req, const Tokenizer& tokenizer);

// The ids of a /detokenize body, checked against the vocabulary.
std::vector<int32_t> parse_detokenize_request(const std::string& body, int32_t n_vocab);
// {"content": text}; special tokens are written as their text.
nlohmann::ordered_json detokenize_response(const std::vector<int32_t>& ids,
                                           const Tokenizer& tokenizer);

// {"prompt": text} for a /v1/chat/completions body (tools included).
nlohmann::ordered_json apply_template_response(const std::string& body, const ChatPrompt& chat);

// What /props reports that is not in the loaded model.
struct ServerFacts {
  std::string model_id;  // --alias, else the file's stem
  std::string model_path;
  std::string build_info;
  std::string chat_template;
  int64_t n_ctx = 0;        // tokens per sequence (prompt + completion)
  int64_t total_slots = 0;  // sequences at once (--max-num-seqs)
  bool speculative = false;
  SamplingParams sampling;  // what a request that gives no sampling field gets
};
// The facts of a loaded model (its plan names the path and max_num_seqs).
ServerFacts server_facts(const ServingContext& c, const std::string& model_id,
                         const std::string& build_info);
nlohmann::ordered_json props_json(const ServerFacts& facts, bool busy);
// One entry per sequence in the engine (running, then waiting).
nlohmann::ordered_json slots_json(const EngineStats& stats, int64_t n_ctx);

struct InfillChunk {
  std::string filename = "tmp";
  std::string text;
};
struct InfillRequest {
  std::string input_prefix, input_suffix, prompt;
  std::vector<InfillChunk> input_extra;
  CompletionRequest completion;  // sampling, stop, stream, n_predict (as max_tokens)
};
// Throws ApiError (400) naming the field.
InfillRequest parse_infill_request(const std::string& body);

// llama-server's fill-in-the-middle prompt: [extra context] [BOS] FIM_PRE
// prefix prompt FIM_SUF suffix FIM_MID, the prefix cut to its last 3/4 of a
// batch and the suffix to its first 1/4 (less the prompt), the extra context
// (repo-level with FIM_REP/FIM_SEP when the vocabulary has them, else
// "--- snippet ---" separators) to what the context leaves. Throws ApiError
// (400, "fim_not_supported") naming the missing tokens when the vocabulary
// has no FIM_PRE, FIM_SUF or FIM_MID.
std::vector<int32_t> infill_prompt(const InfillRequest& req, const Tokenizer& tokenizer,
                                   int64_t n_batch, int64_t n_ctx);

// The engine request of an /infill body: its prompt as token ids, then
// checked as /v1/completions checks them; without n_predict it may run to
// the end of the context.
PreparedCompletion prepare_infill(const InfillRequest& req, const std::vector<int32_t>& prompt,
                                  const Tokenizer& tokenizer, const ChatPrompt& chat,
                                  const ModelLimits& limits);

// llama-server's /completion shape: {"content", "tokens", "stop", "model",
// "tokens_predicted", "tokens_evaluated", "prompt", "stop_type",
// "stopping_word", ...}; streamed as "data: {...}" events with "stop": false,
// the last one with "stop": true and the totals (no [DONE]).
class LlamaCompletionOutput : public SessionOutput {
 public:
  // `prompt_text`: the prompt as the model sees it (special tokens as text).
  LlamaCompletionOutput(std::string model, std::string prompt_text, int64_t n_ctx);

  const std::string& id() const override { return id_; }
  std::string stream_begin(size_t n_choices, const Usage& prompt) override;
  std::string stream_text(int32_t index, const std::string& text,
                          const std::vector<LogprobItem>& logprobs) override;
  std::string stream_tool_calls(int32_t index, const std::vector<ToolCallResult>& calls) override;
  std::string stream_reasoning(int32_t index, const std::string& text) override;
  std::string stream_finish(int32_t index, const ChoiceResult& choice) override;
  std::string stream_end(const Usage& usage) override;
  std::string stream_error(const ApiError& e) override;
  nlohmann::ordered_json full(const std::vector<ChoiceResult>& choices,
                              const Usage& usage) override;

 private:
  nlohmann::ordered_json body(const ChoiceResult& choice, const Usage& usage) const;

  std::string id_;
  std::string model_;
  std::string prompt_text_;
  int64_t n_ctx_;
  int64_t prompt_tokens_ = 0;
  ChoiceResult last_;
};

}  // namespace pagellm
