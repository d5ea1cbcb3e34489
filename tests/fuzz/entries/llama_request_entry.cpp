// llama-server's endpoints (server/llama_api.h) without a server. Byte 0
// picks the endpoint (low two bits: /tokenize, /detokenize, /apply-template,
// /infill) and, for /infill, the vocabulary (bit 2: StarCoder's, which has
// fill-in-the-middle tokens; else the shipped model's, which has none); the
// rest is the body. Refusals must be 400s; an accepted infill prompt holds
// each FIM token once, ends with FIM_MID and is runnable.
#include <algorithm>
#include <string>

#include "entries/fuzz_entries.h"
#include "entries/shipped_model.h"
#include "server/llama_api.h"
#include "util/error.h"

namespace pagellm::fuzz {

namespace {

const Tokenizer& starcoder_tokenizer() {
  static const std::unique_ptr<Tokenizer> tok = [] {
    auto file = GgufFile::open(std::string(PAGELLM_TEST_DATA) +
                               "/tokenizer-vectors/ggml-vocab-starcoder.gguf");
    return Tokenizer::from_gguf(*file);
  }();
  return *tok;
}

void check_infill(const InfillRequest& req, const Tokenizer& tok, const ShippedModel& m) {
  const Vocab& v = tok.vocab();
  std::vector<int32_t> prompt;
  try {
    prompt = infill_prompt(req, tok, /*n_batch=*/64, /*n_ctx=*/512);
  } catch (const ApiError& e) {
    if (e.status != 400 || e.code != "fim_not_supported") violated("infill refused but not for FIM");
    if (v.fim_pre() != kNoToken && v.fim_suf() != kNoToken && v.fim_mid() != kNoToken)
      violated("infill refused on a vocabulary with FIM tokens");
    return;
  }
  for (int32_t id : {v.fim_pre(), v.fim_suf(), v.fim_mid()})
    if (std::count(prompt.begin(), prompt.end(), id) != 1) violated("a FIM token not exactly once");
  if (prompt.back() != v.fim_mid()) violated("the infill prompt does not end with FIM_MID");
  for (int32_t id : prompt)
    if (!v.contains(id)) violated("an infill prompt id outside the vocabulary");
  ModelLimits limits = m.limits;
  limits.n_vocab = tok.n_vocab();
  try {
    check_prepared(prepare_infill(req, prompt, tok, *m.chat, limits), limits);
  } catch (const ApiError& e) {
    if (e.status != 400) violated("a bad infill must be refused with a 400");
  }
}

}  // namespace

int llama_request(const uint8_t* data, size_t size) {
  const ShippedModel& m = shipped_model();
  if (size < 1) return 0;
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    switch (data[0] & 3) {
      case 0: {
        const auto out = tokenize_response(parse_tokenize_request(body), *m.tok);
        for (const auto& t : out["tokens"]) {
          const int64_t id = t.is_object() ? t["id"].get<int64_t>() : t.get<int64_t>();
          if (id < 0 || id >= m.tok->n_vocab()) violated("/tokenize gave an id outside the vocabulary");
        }
        break;
      }
      case 1: {
        const auto ids = parse_detokenize_request(body, m.tok->n_vocab());
        for (int32_t id : ids)
          if (id < 0 || id >= m.tok->n_vocab()) violated("/detokenize accepted an id outside the vocabulary");
        detokenize_response(ids, *m.tok);
        break;
      }
      case 2:
        if (!apply_template_response(body, *m.chat)["prompt"].is_string()) violated("no prompt text");
        break;
      default:
        check_infill(parse_infill_request(body), (data[0] & 4) ? starcoder_tokenizer() : *m.tok, m);
    }
  } catch (const ApiError& e) {
    if (e.status != 400) violated("a bad llama-server request must be refused with a 400");
  }
  return 0;
}

}  // namespace pagellm::fuzz
