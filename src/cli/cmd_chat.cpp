// pagellm chat: a terminal chat rendered with the model's chat template.
// Interactive on a terminal (one user turn per line; /reset, /exit), or
// scripted with --message (repeatable) and --json.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/cli_checks.h"
#include "cli/commands.h"
#include "cli/engine_setup.h"
#include "cli/spec_options.h"
#include "cli/llama_compat.h"
#include "cli/sampling_options.h"
#include "engine/engine.h"
#include "tokenizer/chat_template.h"
#include "util/error.h"

namespace pagellm::cli {

namespace {

struct ChatArgs {
  ModelOptions model;
  PlanOptions plan;
  std::string system;
  std::string chat_template;
  std::vector<std::string> messages;
  int32_t n_predict = 512;
  SamplingOptions sampling;
  SpeculationOptions speculation;
  bool json = false;
  bool no_jinja = false;  // --no-jinja: the built-in template of the model's family
};

class ChatSession {
 public:
  ChatSession(const ChatArgs& a, ModelRunner& model, const Tokenizer& tok, Engine& engine)
      : a_(a),
        model_(model),
        tok_(tok),
        engine_(engine),
        tmpl_(resolve_chat_template(chat_template_from_gguf(model.file()), a.chat_template,
                                    &tok.vocab())) {
    if (!tmpl_.warning.empty()) std::fprintf(stderr, "warning: %s\n", tmpl_.warning.c_str());
    reset();
  }

  void reset() {
    messages_.clear();
    if (!a_.system.empty()) messages_.push_back({"system", a_.system});
  }

  // Renders the conversation plus `user`, runs it, streams the reply through
  // `on_text`, and records both turns.
  nlohmann::json turn(const std::string& user,
                      const std::function<void(const std::string&)>& on_text) {
    messages_.push_back({"user", user});
    ChatRenderOptions ro = ChatRenderOptions::for_vocab(tok_.vocab());
    ro.add_generation_prompt = true;
    const std::string prompt = tmpl_.tmpl.render(messages_, ro);
    // Templates write BOS themselves when the model wants it; add it only if not.
    const std::string bos =
        tok_.vocab().contains(tok_.bos_id()) ? tok_.vocab().text(tok_.bos_id()) : "";
    const bool has_bos = !bos.empty() && prompt.rfind(bos, 0) == 0;
    std::vector<int32_t> ids =
        tok_.encode(prompt, /*add_special=*/!has_bos, /*parse_special=*/true);
    Request req;
    req.prompt = ids;
    req.max_tokens = a_.n_predict;
    req.sampling = sampling_;
    req.sampling.seed += turns_++;
    req.grammar = grammar_;
    std::string reply, reason;
    std::vector<int32_t> out_ids;
    engine_.submit(req, [&](const SeqEvent& ev) {
      if (ev.token >= 0) out_ids.push_back(ev.token);
      reply += ev.text;
      if (!ev.text.empty() && on_text) on_text(ev.text);
      if (ev.finished) reason = finish_reason_name(ev.finish_reason);
    });
    while (engine_.has_work()) engine_.step();
    messages_.push_back({"assistant", reply});
    return {{"user", user},
            {"prompt", prompt},
            {"prompt_ids", ids},
            {"reply", reply},
            {"output_ids", out_ids},
            {"finish_reason", reason},
            {"template", tmpl_.tmpl.name()},
            {"template_origin", tmpl_.origin}};
  }

  void set_sampling(SamplingParams p) { sampling_ = p; }
  void set_grammar(std::shared_ptr<const Grammar> g) { grammar_ = std::move(g); }

 private:
  const ChatArgs& a_;
  ModelRunner& model_;
  const Tokenizer& tok_;
  Engine& engine_;
  ResolvedChatTemplate tmpl_;
  std::vector<ChatMessage> messages_;
  SamplingParams sampling_;
  std::shared_ptr<const Grammar> grammar_;
  uint64_t turns_ = 0;
};

int run_chat(const ChatArgs& a) {
  if (a.json && a.messages.empty())
    throw ConfigError("--json needs scripted turns: give one --message per user turn");
  const auto grammar = a.sampling.grammar();  // a bad grammar fails before the model loads
  ChatArgs args = a;
  if (args.plan.kv_tokens > 0 && args.plan.max_seq_len == 0)
    args.plan.max_seq_len = args.plan.kv_tokens;
  args.speculation.apply(args.plan);
  EngineSetup setup = setup_engine(args.model, args.plan, /*log_plan=*/false,
                                   {.speculation = args.speculation.config()});
  auto& model = setup.model;
  auto& tok = setup.tokenizer;
  Engine engine(*model, *tok, *setup.pool, setup.config);  // prefix caching reuses earlier turns
  args.speculation.attach(engine, setup, /*log=*/false);
  if (args.no_jinja) {
    if (args.chat_template.empty())
      args.chat_template = no_jinja_template(model->file(), tok->vocab());
    else
      std::fprintf(stderr, "note: --no-jinja: --chat-template already chooses the template\n");
  }
  ChatSession chat(args, *model, *tok, engine);
  chat.set_sampling(a.sampling.resolve(model->file()));
  chat.set_grammar(grammar);

  if (!a.messages.empty()) {
    nlohmann::json turns = nlohmann::json::array();
    for (const auto& m : a.messages) {
      auto t = chat.turn(
          m, a.json ? std::function<void(const std::string&)>() : [](const std::string& s) {
            std::fputs(s.c_str(), stdout);
            std::fflush(stdout);
          });
      if (!a.json) std::fputs("\n", stdout);
      t["turn"] = turns.size() + 1;
      turns.push_back(t);
    }
    if (a.json)
      std::puts(nlohmann::json({{"turns", turns}})
                    .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                    .c_str());
    return 0;
  }

  const bool tty = ::isatty(STDIN_FILENO);
  if (tty)
    std::fprintf(stderr, "chat with %s (empty line or /exit to quit, /reset to start over)\n",
                 model->file().path().c_str());
  std::string line;
  for (;;) {
    if (tty) std::fputs("> ", stdout), std::fflush(stdout);
    if (!std::getline(std::cin, line) || line == "/exit") break;
    if (line.empty()) {
      if (tty) break;
      continue;
    }
    if (line == "/reset") {
      chat.reset();
      continue;
    }
    try {
      chat.turn(line, [](const std::string& s) {
        std::fputs(s.c_str(), stdout);
        std::fflush(stdout);
      });
    } catch (const ConfigError& e) {
      std::fprintf(stderr, "\nerror: %s (try /reset)\n", e.what());
    }
    std::fputs("\n", stdout);
  }
  return 0;
}

}  // namespace

Runner add_chat(CLI::App& app) {
  auto a = std::make_shared<ChatArgs>();
  CLI::App* sub = app.add_subcommand("chat", "Chat with a model using its chat template");
  a->plan.max_num_seqs = 1;
  a->plan.max_batched_tokens = 512;  // prefill chunk: a smaller workspace for one sequence
  a->model.add_to(*sub);
  a->plan.add_to(*sub);
  sub->add_option("--system", a->system, "System message");
  sub->add_option("--chat-template", a->chat_template,
                  "Template to use instead of the model's: a built-in name (chatml, llama2, "
                  "llama3, mistral, zephyr, phi3, gemma) or a file");
  sub->add_option("--message", a->messages,
                  "A user turn (repeatable); answers them in order and exits instead of reading "
                  "the terminal");
  sub->add_option("-n,--n-predict", a->n_predict, "Most tokens per reply")
      ->check(above(0));
  a->sampling.add_to(*sub);
  a->speculation.add_to(*sub);
  add_jinja_flags(*sub, a->no_jinja, /*applies_templates=*/true);
  sub->add_flag("--json", a->json, "With --message: print one JSON object with every turn");
  return [a] { return run_chat(*a); };
}

}  // namespace pagellm::cli
