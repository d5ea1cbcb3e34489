// A cursor over the tokens of one template, shared by the statement parser
// (jinja_parser.cpp) and the expression parser (jinja_expr_parser.h), with the
// nesting-depth guards that keep hostile input from exhausting the stack.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "jinja/jinja_lexer.h"

namespace pagellm::jinja {

// Deepest nesting of expressions or of blocks the parser accepts.
inline constexpr int kMaxParseDepth = 256;

class TokenStream {
 public:
  explicit TokenStream(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  const Token& cur() const { return toks_[i_]; }
  const Token& look(size_t ahead = 1) const {
    const size_t j = i_ + ahead;
    return j < toks_.size() ? toks_[j] : toks_.back();
  }
  const Token& next() {
    const Token& t = toks_[i_];
    if (i_ + 1 < toks_.size()) ++i_;
    return t;
  }
  bool is_op(std::string_view op) const {
    return cur().type == TokenType::kOperator && cur().text == op;
  }
  bool is_name(std::string_view name) const {
    return cur().type == TokenType::kName && cur().text == name;
  }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!is_name(name)) return false;
    next();
    return true;
  }
  void expect_op(std::string_view op) {
    if (!skip_op(op)) fail(cur().pos, "expected '" + std::string(op) + "', got " + describe(cur()));
  }
  void expect_name(std::string_view name) {
    if (!skip_name(name)) {
      fail(cur().pos, "expected '" + std::string(name) + "', got " + describe(cur()));
    }
  }
  const Token& expect_any_name(const char* what) {
    if (cur().type != TokenType::kName) {
      fail(cur().pos, std::string("expected ") + what + ", got " + describe(cur()));
    }
    return next();
  }
  void expect_block_end() {
    if (cur().type != TokenType::kBlockEnd) {
      fail(cur().pos, "expected end of statement block '%}', got " + describe(cur()));
    }
    next();
  }

  [[noreturn]] void fail(SourcePos pos, const std::string& message) const {
    throw PositionedError{pos, message};
  }

  // Bounds the nesting depth (recursion and left-leaning chains).
  class DepthGuard {
   public:
    DepthGuard(TokenStream& p, SourcePos pos) : p_(p) {
      if (++p_.depth_ > kMaxParseDepth) {
        p_.fail(pos, "template nested too deeply (more than " + std::to_string(kMaxParseDepth) +
                         " levels)");
      }
    }
    ~DepthGuard() { --p_.depth_; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;

   private:
    TokenStream& p_;
  };
  // Counts one more link of a chain (a + b + c ...) until the guard's scope ends.
  class ChainGuard {
   public:
    explicit ChainGuard(TokenStream& p) : p_(p) {}
    ~ChainGuard() { p_.depth_ -= n_; }
    void link(SourcePos pos) {
      ++n_;
      if (++p_.depth_ > kMaxParseDepth) {
        p_.fail(pos, "expression nested too deeply (more than " + std::to_string(kMaxParseDepth) +
                         " levels)");
      }
    }

   private:
    TokenStream& p_;
    int n_ = 0;
  };

 private:
  std::vector<Token> toks_;  // ends with kEof
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace pagellm::jinja
