// Chat templates against Python's Jinja2: tests/data/chat-templates/golden.json
// (written by make_chat_golden.py) holds, for every real template and every
// built-in, what Jinja2 renders (or the error it raises) for a set of
// conversations. Also: the built-ins' sources, resolve_chat_template().
#include "tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "support/test_support.h"
#include "tokenizer/chat_template_builtins.h"
#include "tokenizer/vocab.h"
#include "util/error.h"

namespace pagellm {
namespace {

using nlohmann::ordered_json;

std::string templates_path(const std::string& rel) {
  return test::data_path("chat-templates/" + rel);
}

// The clock make_chat_golden.py gives strftime_now(): 2024-07-26 10:30:00.
std::tm golden_now() {
  std::tm tm{};
  tm.tm_year = 2024 - 1900;
  tm.tm_mon = 6;
  tm.tm_mday = 26;
  tm.tm_hour = 10;
  tm.tm_min = 30;
  tm.tm_wday = 5;  // a Friday
  tm.tm_yday = 207;
  return tm;
}

// Where two strings first differ, for readable failures.
std::string first_difference(const std::string& a, const std::string& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  const size_t from = i < 40 ? 0 : i - 40;
  return "first difference at byte " + std::to_string(i) + ":\n  got:      ..." +
         ordered_json(a.substr(from, 80)).dump() + "\n  expected: ..." +
         ordered_json(b.substr(from, 80)).dump();
}

TEST(ChatTemplateGolden, EveryTemplateRendersAsJinja2) {
  const ordered_json golden = ordered_json::parse(test::read_file(templates_path("golden.json")));
  ChatRenderOptions opts;
  opts.bos_token = golden["bos_token"].get<std::string>();
  opts.eos_token = golden["eos_token"].get<std::string>();
  opts.render.now = golden_now;
  std::map<std::string, ChatTemplate> templates;
  std::map<std::string, std::pair<int, int>> tally;  // template -> (cases, matched)
  for (const ordered_json& c : golden["cases"]) {
    const std::string file = c["template"].get<std::string>();
    const std::string conversation = c["conversation"].get<std::string>();
    SCOPED_TRACE(file + " / " + conversation +
                 (c["add_generation_prompt"].get<bool>() ? " / generation prompt" : ""));
    auto it = templates.find(file);
    if (it == templates.end()) {
      it = templates.emplace(file, ChatTemplate(test::read_file(templates_path(file)), file)).first;
    }
    const ordered_json& conv = golden["conversations"][conversation];
    opts.add_generation_prompt = c["add_generation_prompt"].get<bool>();
    const ordered_json* extra = conv.contains("extra") ? &conv["extra"] : nullptr;
    auto& [cases, matched] = tally[file];
    ++cases;
    if (c.contains("output")) {
      try {
        const std::string got = it->second.render_json(conv["messages"], opts, extra);
        const std::string want = c["output"].get<std::string>();
        EXPECT_EQ(got, want) << first_difference(got, want);
        matched += got == want;
      } catch (const jinja::TemplateError& e) {
        ADD_FAILURE() << "threw: " << e.what();
      }
    } else {
      // Jinja2 refused the conversation; so must we, with the template's own
      // message when it called raise_exception().
      const std::string want = c["error"].get<std::string>();
      try {
        it->second.render_json(conv["messages"], opts, extra);
        ADD_FAILURE() << "rendered, but Jinja2 raised " << want;
      } catch (const jinja::TemplateRaised& e) {
        EXPECT_TRUE(c["raised"].get<bool>()) << "raise_exception, but Jinja2 raised " << want;
        EXPECT_EQ("TemplateError: " + e.message(), want);
        matched += 1;
      } catch (const jinja::TemplateError& e) {
        EXPECT_FALSE(c["raised"].get<bool>()) << e.what() << "; Jinja2 raised " << want;
        matched += !c["raised"].get<bool>();
      }
    }
  }
  EXPECT_EQ(tally.size(), 27u);  // 20 real templates + 7 built-ins
  for (const auto& [file, counts] : tally) {
    EXPECT_EQ(counts.first, counts.second)
        << file << ": " << counts.second << "/" << counts.first << " cases as Jinja2";
  }
}

TEST(ChatTemplateBuiltins, SourcesMatchTheExportedFiles) {
  ASSERT_EQ(builtin_chat_template_names().size(), 7u);
  for (std::string_view name : builtin_chat_template_names()) {
    SCOPED_TRACE(std::string(name));
    const auto source = builtin_chat_template_source(name);
    ASSERT_TRUE(source.has_value());
    EXPECT_EQ(*source, test::read_file(templates_path("builtin/" + std::string(name) + ".jinja")));
    EXPECT_NO_THROW(ChatTemplate::builtin(name));
  }
  EXPECT_FALSE(builtin_chat_template_source("nope").has_value());
  try {
    ChatTemplate::builtin("nope");
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("chatml, llama2"), std::string::npos) << e.what();
  }
}

TEST(ChatTemplate, RendersPlainMessages) {
  const std::vector<ChatMessage> msgs = {{"system", "Be brief."}, {"user", "Hi"}};
  ChatRenderOptions opts;
  EXPECT_EQ(ChatTemplate::builtin("chatml").render(msgs, opts),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n");
  opts.add_generation_prompt = false;
  opts.bos_token = "<|begin_of_text|>";
  EXPECT_EQ(ChatTemplate::builtin("llama3").render(msgs, opts),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>");
}

TEST(ChatTemplate, ExtraVariablesAndRaise) {
  const ChatTemplate t(
      "{{ bos_token }}{% for m in messages %}[{{ m.role }}:{{ m.content }}]"
      "{% endfor %}{{ tools | length }}{{ add_generation_prompt }}",
      "inline");
  ChatRenderOptions opts;
  opts.bos_token = "<s>";
  const ordered_json messages = ordered_json::parse(R"([{"role": "user", "content": "a"}])");
  const ordered_json extra = ordered_json::parse(R"({"tools": [1, 2, 3]})");
  EXPECT_EQ(t.render_json(messages, opts, &extra), "<s>[user:a]3True");
  EXPECT_EQ(t.render_json(messages, opts), "<s>[user:a]0True");

  try {
    ChatTemplate::builtin("gemma").render(std::vector<ChatMessage>{{"user", "a"}, {"user", "b"}},
                                          opts);
    ADD_FAILURE() << "no error";
  } catch (const jinja::TemplateRaised& e) {
    EXPECT_EQ(e.message(), "Conversation roles must alternate user/assistant/user/assistant/...");
    EXPECT_EQ(e.template_name(), "gemma");
    EXPECT_GT(e.pos().line, 0);
  }
}

TEST(ChatTemplate, DetectsFamilies) {
  EXPECT_EQ(detect_chat_template_family("{{ '<|im_start|>' }}"), "chatml");
  EXPECT_EQ(detect_chat_template_family("<|start_header_id|>"), "llama3");
  EXPECT_EQ(detect_chat_template_family("<start_of_turn>"), "gemma");
  EXPECT_EQ(detect_chat_template_family("<|user|> <|end|>"), "phi3");
  EXPECT_EQ(detect_chat_template_family("<|user|> </s>"), "zephyr");
  EXPECT_EQ(detect_chat_template_family("[INST] <<SYS>>"), "llama2");
  EXPECT_EQ(detect_chat_template_family("[INST]"), "mistral");
  EXPECT_FALSE(detect_chat_template_family("plain").has_value());
  for (const char* file :
       {"Qwen-Qwen2.5-7B-Instruct.jinja", "meta-llama-Llama-3.1-8B-Instruct.jinja",
        "google-gemma-2-2b-it.jinja", "microsoft-Phi-3.5-mini-instruct.jinja",
        "mistralai-Mistral-Nemo-Instruct-2407.jinja"}) {
    EXPECT_TRUE(detect_chat_template_family(test::read_file(templates_path(file))).has_value())
        << file;
  }
}

TEST(ChatTemplateResolve, PrefersOverrideThenModelThenDetection) {
  const std::string qwen = test::read_file(templates_path("Qwen-Qwen2.5-7B-Instruct.jinja"));

  ResolvedChatTemplate r = resolve_chat_template(qwen);
  EXPECT_EQ(r.origin, "model");
  EXPECT_EQ(r.tmpl.source(), qwen);
  EXPECT_TRUE(r.warning.empty());

  r = resolve_chat_template(qwen, "llama3");
  EXPECT_EQ(r.origin, "override");
  EXPECT_EQ(r.tmpl.name(), "llama3");

  // An override naming a file.
  test::TempPath path(".jinja");
  test::write_file(path.path, "{% for m in messages %}{{ m.content }}{% endfor %}");
  r = resolve_chat_template(qwen, path.path);
  EXPECT_EQ(r.origin, "override");
  EXPECT_EQ(r.tmpl.render(std::vector<ChatMessage>{{"user", "x"}}, {}), "x");

  EXPECT_THROW(resolve_chat_template(qwen, "/no/such/template.jinja"), ConfigError);
  test::write_file(path.path, "{% for m in messages %}");
  EXPECT_THROW(resolve_chat_template(qwen, path.path), jinja::TemplateError);

  // A model template that does not parse: the family its markers name.
  r = resolve_chat_template(std::string("<|im_start|>{% generate_magic %}"));
  EXPECT_EQ(r.origin, "detected");
  EXPECT_EQ(r.tmpl.name(), "chatml");
  EXPECT_NE(r.warning.find("model chat template:1:"), std::string::npos) << r.warning;
  EXPECT_NE(r.warning.find("unknown tag 'generate_magic'"), std::string::npos) << r.warning;

  r = resolve_chat_template(std::string("[INST] {{ x | no_such_filter }}"));
  EXPECT_EQ(r.tmpl.name(), "mistral");
  EXPECT_FALSE(r.warning.empty());

  // No template at all.
  r = resolve_chat_template(std::nullopt);
  EXPECT_EQ(r.origin, "default");
  EXPECT_EQ(r.tmpl.name(), "chatml");
  EXPECT_FALSE(r.warning.empty());
}

TEST(ChatTemplateResolve, DetectsFromTheVocabulary) {
  Vocab::Spec spec;
  spec.model = "gpt2";
  spec.tokens = {"a", "b", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"};
  spec.bos = 1;
  spec.eos = 4;
  const Vocab vocab(spec);
  EXPECT_EQ(detect_chat_template_family(vocab), "llama3");
  const ResolvedChatTemplate r = resolve_chat_template(std::nullopt, {}, &vocab);
  EXPECT_EQ(r.origin, "detected");
  EXPECT_EQ(r.tmpl.name(), "llama3");
  const ChatRenderOptions opts = ChatRenderOptions::for_vocab(vocab);
  EXPECT_EQ(opts.bos_token, "b");
  EXPECT_EQ(opts.eos_token, "<|eot_id|>");
}

}  // namespace
}  // namespace pagellm
