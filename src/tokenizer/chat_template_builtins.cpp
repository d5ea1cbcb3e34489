#include "tokenizer/chat_template_builtins.h"

namespace pagellm {
namespace {

// clang-format off
constexpr std::string_view kChatml = R"jinja({%- for message in messages %}
    {{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
)jinja";

constexpr std::string_view kLlama2 = R"jinja({%- if messages and messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set system_message = none %}
    {%- set loop_messages = messages %}
{%- endif %}
{%- for message in loop_messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {%- if message['role'] == 'user' %}
        {%- set content = message['content'] %}
        {%- if loop.first and system_message is not none %}
            {%- set content = '<<SYS>>\n' + system_message + '\n<</SYS>>\n\n' + content %}
        {%- endif %}
        {{- bos_token + '[INST] ' + content | trim + ' [/INST]' }}
    {%- else %}
        {{- ' ' + message['content'] | trim + ' ' + eos_token }}
    {%- endif %}
{%- endfor %}
)jinja";

constexpr std::string_view kLlama3 = R"jinja({{- bos_token }}
{%- for message in messages %}
    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
)jinja";

constexpr std::string_view kMistral = R"jinja({%- if messages and messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set system_message = none %}
    {%- set loop_messages = messages %}
{%- endif %}
{{- bos_token }}
{%- for message in loop_messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {%- if message['role'] == 'user' %}
        {%- if loop.first and system_message is not none %}
            {{- '[INST] ' + system_message + '\n\n' + message['content'] + ' [/INST]' }}
        {%- else %}
            {{- '[INST] ' + message['content'] + ' [/INST]' }}
        {%- endif %}
    {%- else %}
        {{- message['content'] + eos_token }}
    {%- endif %}
{%- endfor %}
)jinja";

constexpr std::string_view kZephyr = R"jinja({%- for message in messages %}
    {%- if message['role'] in ['system', 'user', 'assistant'] %}
        {{- '<|' + message['role'] + '|>\n' + message['content'] + eos_token + '\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|assistant|>\n' }}
{%- endif %}
)jinja";

constexpr std::string_view kPhi3 = R"jinja({%- for message in messages %}
    {%- if message['role'] == 'system' and message['content'] %}
        {{- '<|system|>\n' + message['content'] + '<|end|>\n' }}
    {%- elif message['role'] in ['user', 'assistant'] %}
        {{- '<|' + message['role'] + '|>\n' + message['content'] + '<|end|>\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|assistant|>\n' }}
{%- else %}
    {{- eos_token }}
{%- endif %}
)jinja";

constexpr std::string_view kGemma = R"jinja({{- bos_token }}
{%- if messages and messages[0]['role'] == 'system' %}
    {%- set first_prefix = messages[0]['content'] | trim + '\n\n' %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set first_prefix = '' %}
    {%- set loop_messages = messages %}
{%- endif %}
{%- for message in loop_messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {%- set role = 'model' if message['role'] == 'assistant' else message['role'] %}
    {{- '<start_of_turn>' + role + '\n' + (first_prefix if loop.first else '') + message['content'] | trim + '<end_of_turn>\n' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<start_of_turn>model\n' }}
{%- endif %}
)jinja";

// clang-format on

struct Builtin {
  std::string_view name;
  std::string_view source;
};

constexpr Builtin kBuiltins[] = {
    {"chatml", kChatml}, {"llama2", kLlama2}, {"llama3", kLlama3}, {"mistral", kMistral},
    {"zephyr", kZephyr}, {"phi3", kPhi3},     {"gemma", kGemma},
};

}  // namespace

const std::vector<std::string_view>& builtin_chat_template_names() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> v;
    for (const Builtin& b : kBuiltins) v.push_back(b.name);
    return v;
  }();
  return names;
}

std::optional<std::string_view> builtin_chat_template_source(std::string_view name) {
  for (const Builtin& b : kBuiltins) {
    if (b.name == name) return b.source;
  }
  return std::nullopt;
}

}  // namespace pagellm
