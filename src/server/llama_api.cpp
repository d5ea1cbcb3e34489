#include "server/llama_api.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "engine/engine.h"
#include "server/chat_prompt.h"
#include "server/json_fields.h"
#include "server/sse.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace pagellm {

namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

bool bool_or(const json& body, const char* key, bool dflt) {
  const json* v = json_field(body, key);
  if (!v) return dflt;
  if (!v->is_boolean())
    bad_request(key, fmt::format("'{}' must be a boolean, not {}", key, json_kind(*v)));
  return v->get<bool>();
}

std::string string_or(const json& obj, const char* key, const std::string& dflt,
                      const std::string& param) {
  const json* v = json_field(obj, key);
  if (!v) return dflt;
  if (!v->is_string())
    bad_request(param, fmt::format("'{}' must be a string, not {}", param, json_kind(*v)));
  return v->get<std::string>();
}

void append(std::vector<int32_t>& out, const std::vector<int32_t>& more) {
  out.insert(out.end(), more.begin(), more.end());
}

}  // namespace

TokenizeRequest parse_tokenize_request(const std::string& text) {
  const json body = parse_request_body<json>(text);
  TokenizeRequest r;
  const json* c = json_field(body, "content");
  if (!c) bad_request("content", "'content' is required");
  if (!c->is_string())
    bad_request("content", fmt::format("'content' must be a string, not {}", json_kind(*c)));
  r.content = c->get<std::string>();
  r.add_special = bool_or(body, "add_special", r.add_special);
  r.parse_special = bool_or(body, "parse_special", r.parse_special);
  r.with_pieces = bool_or(body, "with_pieces", r.with_pieces);
  return r;
}

ojson tokenize_response(const TokenizeRequest& req, const Tokenizer& tokenizer) {
  const std::vector<int32_t> ids = tokenizer.encode(req.content, req.add_special, req.parse_special);
  ojson tokens = ojson::array();
  for (int32_t id : ids) {
    if (!req.with_pieces) {
      tokens.push_back(id);
      continue;
    }
    const std::string piece = tokenizer.token_to_piece(id, /*special=*/true);
    ojson p;
    if (utf8_is_valid(piece)) {
      p = piece;
    } else {
      p = ojson::array();
      for (unsigned char b : piece) p.push_back(static_cast<int>(b));
    }
    tokens.push_back({{"id", id}, {"piece", std::move(p)}});
  }
  return {{"tokens", std::move(tokens)}};
}

std::vector<int32_t> parse_detokenize_request(const std::string& text, int32_t n_vocab) {
  const json body = parse_request_body<json>(text);
  const json* t = json_field(body, "tokens");
  if (!t) bad_request("tokens", "'tokens' is required");
  if (!t->is_array())
    bad_request("tokens",
                fmt::format("'tokens' must be an array of token ids, not {}", json_kind(*t)));
  std::vector<int32_t> ids;
  ids.reserve(t->size());
  for (const json& v : *t) {
    if (!v.is_number_integer())
      bad_request("tokens", fmt::format("'tokens' must hold only integers (token ids), found {}",
                                        json_kind(v)));
    const bool in_range = v.is_number_unsigned() ? v.get<uint64_t>() < static_cast<uint64_t>(n_vocab)
                                                 : v.get<int64_t>() >= 0 && v.get<int64_t>() < n_vocab;
    if (!in_range)
      bad_request(
          "tokens",
          fmt::format("token id {} is outside the vocabulary (0..{})", v.dump(), n_vocab - 1),
          "invalid_token_id");
    ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
  }
  return ids;
}

ojson detokenize_response(const std::vector<int32_t>& ids, const Tokenizer& tokenizer) {
  return {{"content", tokenizer.decode(ids, /*special=*/true)}};
}

ojson apply_template_response(const std::string& body, const ChatPrompt& chat) {
  const CompletionRequest req = parse_completion_request(body, Endpoint::kChat);
  // As prepare_completion renders it: with tools, when there are tools or tool messages.
  const RenderedPrompt rendered = req.messages_json.is_null()
                                      ? chat.render(req.messages)
                                      : chat.render_with_tools(req.messages_json, req.tools_json,
                                                               req.tools);
  return {{"prompt", rendered.text}};
}

ServerFacts server_facts(const ServingContext& c, const std::string& model_id,
                         const std::string& build_info) {
  ServerFacts f;
  f.model_id = model_id;
  f.build_info = build_info;
  f.chat_template = c.chat ? c.chat->source() : "";
  f.n_ctx = c.limits.max_context;
  if (auto m = c.plan.find("model"); m != c.plan.end() && m->is_object())
    f.model_path = m->value("path", "");
  if (c.plan.is_object()) f.total_slots = c.plan.value("max_num_seqs", 0);
  f.sampling = c.sampling_defaults.params;
  return f;
}

ojson props_json(const ServerFacts& f, bool busy) {
  // The defaults a request gets here, in llama-server's field names.
  const SamplingParams& d = f.sampling;
  const ojson params = {{"n_predict", -1},
                        {"seed", -1},
                        {"temperature", d.temperature},
                        {"top_k", d.top_k},
                        {"top_p", d.top_p},
                        {"min_p", d.min_p},
                        {"repeat_last_n", d.repeat_last_n},
                        {"repeat_penalty", d.repetition_penalty},
                        {"presence_penalty", d.presence_penalty},
                        {"frequency_penalty", d.frequency_penalty},
                        {"stop", ojson::array()},
                        {"max_tokens", -1},
                        {"n_keep", 0},
                        {"ignore_eos", false},
                        {"stream", false},
                        {"n_probs", 0},
                        {"grammar", ""},
                        {"samplers", {"penalties", "top_k", "top_p", "min_p", "temperature"}}};
  const ojson settings = {{"id", 0},
                          {"id_task", -1},
                          {"n_ctx", f.n_ctx},
                          {"speculative", f.speculative},
                          {"is_processing", busy},
                          {"params", params},
                          {"prompt", ""},
                          {"next_token",
                           {{"has_next_token", true},
                            {"has_new_line", false},
                            {"n_remain", -1},
                            {"n_decoded", 0},
                            {"stopping_word", ""}}}};
  return {{"default_generation_settings", settings},
          {"total_slots", f.total_slots},
          {"model_path", f.model_path},
          {"model_alias", f.model_id},
          {"n_ctx", f.n_ctx},
          {"chat_template", f.chat_template},
          {"chat_template_caps", ojson::object()},
          {"modalities", {{"vision", false}, {"audio", false}}},
          {"build_info", f.build_info},
          {"is_sleeping", false}};
}

ojson slots_json(const EngineStats& stats, int64_t n_ctx) {
  ojson out = ojson::array();
  for (const SequenceStats& s : stats.sequences) {
    const bool prefill = s.n_computed < s.n_prompt;
    const char* state = !s.running ? "waiting" : prefill ? "prefill" : "decoding";
    const int64_t decoded = s.n_tokens - s.n_prompt;
    out.push_back({{"id", s.id},
                   {"id_task", s.id},
                   {"n_ctx", n_ctx},
                   {"is_processing", true},
                   {"state", state},
                   {"n_prompt_tokens", s.n_prompt},
                   {"n_tokens", s.n_tokens},
                   {"n_computed", s.n_computed},
                   {"next_token",
                    {{"has_next_token", true},
                     {"n_remain", std::max<int64_t>(0, s.max_total - s.n_tokens)},
                     {"n_decoded", decoded}}}});
  }
  return out;
}

InfillRequest parse_infill_request(const std::string& text) {
  const json body = parse_request_body<json>(text);
  InfillRequest r;
  r.input_prefix = string_or(body, "input_prefix", "", "input_prefix");
  r.input_suffix = string_or(body, "input_suffix", "", "input_suffix");
  r.prompt = string_or(body, "prompt", "", "prompt");
  if (const json* extra = json_field(body, "input_extra")) {
    if (!extra->is_array())
      bad_request("input_extra",
                  "'input_extra' must be an array of {\"filename\": string, \"text\": string}");
    for (size_t i = 0; i < extra->size(); ++i) {
      const json& chunk = (*extra)[i];
      const std::string p = fmt::format("input_extra[{}]", i);
      if (!chunk.is_object())
        bad_request(p, fmt::format("'{}' must be an object, not {}", p, json_kind(chunk)));
      const json* t = json_field(chunk, "text");
      if (!t || !t->is_string())
        bad_request(p + ".text", fmt::format("'{}' needs a string 'text'", p));
      InfillChunk c;
      c.text = t->get<std::string>();
      c.filename = string_or(chunk, "filename", c.filename, p + ".filename");
      r.input_extra.push_back(std::move(c));
    }
  }
  // The sampling fields, in the Completions API's names, through its parser.
  json completion = json::object();
  completion["prompt"] = json::array({0});  // replaced by the FIM prompt
  for (const char* key : {"temperature", "top_k", "top_p", "min_p", "seed", "stop",
                          "presence_penalty", "frequency_penalty", "stream", "ignore_eos",
                          "grammar", "json_schema", "response_format", "max_tokens"})
    if (const json* v = json_field(body, key)) completion[key] = *v;
  if (const json* v = json_field(body, "repeat_penalty")) completion["repetition_penalty"] = *v;
  if (const json* v = json_field(body, "n_predict")) {
    if (!v->is_number_integer())
      bad_request("n_predict",
                  fmt::format("'n_predict' must be an integer, not {}", json_kind(*v)));
    if (v->is_number_unsigned() || v->get<int64_t>() != -1) completion["max_tokens"] = *v;
  }
  try {
    r.completion = parse_completion_request(completion.dump(-1, ' ', false, json::error_handler_t::replace),
                                            Endpoint::kCompletion);
  } catch (const ApiError& e) {
    std::string param = e.param, message = e.what();
    // Name the fields as the client wrote them.
    auto rename = [&](const std::string& from, const std::string& to) {
      if (param == from && !json_field(body, from.c_str())) {
        param = to;
        for (size_t at = message.find(from); at != std::string::npos; at = message.find(from, at + to.size()))
          message.replace(at, from.size(), to);
      }
    };
    rename("max_tokens", "n_predict");
    rename("repetition_penalty", "repeat_penalty");
    throw ApiError(e.status, message, e.type, param, e.code);
  }
  return r;
}

std::vector<int32_t> infill_prompt(const InfillRequest& req, const Tokenizer& tok, int64_t n_batch,
                                   int64_t n_ctx) {
  const Vocab& v = tok.vocab();
  std::string missing;
  auto need = [&](int32_t id, const char* what) {
    if (id == kNoToken) missing += std::string(missing.empty() ? "" : ", ") + what;
  };
  need(v.fim_pre(), "prefix (FIM_PRE)");
  need(v.fim_suf(), "suffix (FIM_SUF)");
  need(v.fim_mid(), "middle (FIM_MID)");
  if (!missing.empty())
    throw ApiError(400,
                   fmt::format("infill is not supported by this model: its vocabulary has no "
                               "fill-in-the-middle {} token",
                               missing),
                   "invalid_request_error", "", "fim_not_supported");
  // Plain text everywhere: special-token text in the code is code.
  auto text = [&](const std::string& s) { return tok.encode(s, /*add_special=*/false, false); };

  std::vector<int32_t> extra;
  if (v.fim_rep() != kNoToken) {
    extra.push_back(v.fim_rep());
    append(extra, text("myproject\n"));
  }
  for (const InfillChunk& c : req.input_extra) {
    if (v.fim_sep() != kNoToken) {
      extra.push_back(v.fim_sep());
      append(extra, text(c.filename + "\n"));
    } else {
      append(extra, text("\n\n--- snippet ---\n\n"));
    }
    append(extra, text(c.text));
  }
  if (v.fim_sep() != kNoToken) {
    extra.push_back(v.fim_sep());
    append(extra, text("filename\n"));
  }

  std::vector<int32_t> prefix = text(req.input_prefix);
  std::vector<int32_t> suffix = text(req.input_suffix);
  const std::vector<int32_t> prompt = text(req.prompt);
  // Prefix and suffix share a batch 3:1; the extra context gets what the
  // context leaves after a batch and twice the completion.
  const int64_t n_predict = req.completion.max_tokens.value_or(-1);
  const int64_t take_prefix = std::min<int64_t>(static_cast<int64_t>(prefix.size()), 3 * (n_batch / 4));
  const int64_t take_suffix = std::min<int64_t>(
      static_cast<int64_t>(suffix.size()),
      std::max<int64_t>(0, n_batch / 4 - (2 + static_cast<int64_t>(prompt.size()))));
  const int64_t take_extra = std::min<int64_t>(std::max<int64_t>(0, n_ctx - n_batch - 2 * n_predict),
                                               static_cast<int64_t>(extra.size()));
  prefix.erase(prefix.begin(), prefix.end() - take_prefix);  // its end, next to the gap
  suffix.resize(static_cast<size_t>(take_suffix));           // its start

  std::vector<int32_t> out(extra.end() - take_extra, extra.end());
  if (v.add_bos() && v.bos() != kNoToken) out.push_back(v.bos());
  out.push_back(v.fim_pre());
  append(out, prefix);
  append(out, prompt);
  out.push_back(v.fim_suf());
  append(out, suffix);
  out.push_back(v.fim_mid());
  return out;
}

PreparedCompletion prepare_infill(const InfillRequest& req, const std::vector<int32_t>& prompt,
                                  const Tokenizer& tokenizer, const ChatPrompt& chat,
                                  const ModelLimits& limits) {
  CompletionRequest c = req.completion;
  c.n = 1;
  c.prompts.assign(1, PromptInput{true, "", std::vector<int64_t>(prompt.begin(), prompt.end())});
  PreparedCompletion p = prepare_completion(c, tokenizer, chat, limits);
  // llama-server's n_predict -1: until end of generation or the context.
  if (!c.max_tokens)
    for (size_t i = 0; i < p.requests.size(); ++i)
      p.requests[i].max_tokens = static_cast<int32_t>(std::min<int64_t>(
          limits.max_context - p.prompt_tokens[i], std::numeric_limits<int32_t>::max()));
  return p;
}

LlamaCompletionOutput::LlamaCompletionOutput(std::string model, std::string prompt_text,
                                             int64_t n_ctx)
    : id_(new_random_id("infill-")),
      model_(std::move(model)),
      prompt_text_(std::move(prompt_text)),
      n_ctx_(n_ctx) {}

ojson LlamaCompletionOutput::body(const ChoiceResult& c, const Usage& u) const {
  const char* stop_type = c.finish_reason == FinishReason::kLength ? "limit"
                          : !c.stop_sequence.empty()               ? "word"
                                                                   : "eos";
  return {{"index", 0},
          {"content", c.text},
          {"tokens", ojson::array()},
          {"id_slot", -1},
          {"stop", true},
          {"model", model_},
          {"tokens_predicted", u.completion_tokens},
          {"tokens_evaluated", u.prompt_tokens},
          {"generation_settings", {{"n_ctx", n_ctx_}, {"model", model_}}},
          {"prompt", prompt_text_},
          {"has_new_line", c.text.find('\n') != std::string::npos},
          {"truncated", false},
          {"stop_type", stop_type},
          {"stopping_word", c.stop_sequence},
          {"tokens_cached", u.cached_tokens}};
}

std::string LlamaCompletionOutput::stream_begin(size_t, const Usage& prompt) {
  prompt_tokens_ = prompt.prompt_tokens;
  return "";
}

std::string LlamaCompletionOutput::stream_text(int32_t, const std::string& text,
                                               const std::vector<LogprobItem>&) {
  if (text.empty()) return "";
  return sse_data({{"index", 0},
                   {"content", text},
                   {"tokens", ojson::array()},
                   {"stop", false},
                   {"id_slot", -1},
                   {"tokens_evaluated", prompt_tokens_}});
}

std::string LlamaCompletionOutput::stream_tool_calls(int32_t, const std::vector<ToolCallResult>&) {
  return "";  // /infill takes no tools
}

std::string LlamaCompletionOutput::stream_reasoning(int32_t, const std::string&) {
  return "";  // /completion's shape has no place for it
}

std::string LlamaCompletionOutput::stream_finish(int32_t, const ChoiceResult& choice) {
  last_ = choice;
  return "";
}

std::string LlamaCompletionOutput::stream_end(const Usage& usage) {
  // The text went out in pieces: the last event carries none, as llama-server's.
  ChoiceResult c = last_;
  ojson b = body(c, usage);
  b["content"] = "";
  return sse_data(b);
}

std::string LlamaCompletionOutput::stream_error(const ApiError& e) {
  return sse_data(error_json(e));
}

ojson LlamaCompletionOutput::full(const std::vector<ChoiceResult>& choices, const Usage& usage) {
  return body(choices.empty() ? ChoiceResult{} : choices.front(), usage);
}

}  // namespace pagellm
