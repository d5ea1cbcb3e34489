// A whole file's bytes (text inputs of the CLI: prompts, perplexity texts).
#pragma once

#include <string>

namespace pagellm {

// Throws SystemError "cannot read PATH: <errno text>".
std::string read_whole_file(const std::string& path);

}  // namespace pagellm
