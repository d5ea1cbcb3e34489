// The Jinja evaluator: renders a syntax tree (jinja_ast.h) against variables.
//
// Semantics follow Jinja2 3.1 as Hugging Face's apply_chat_template uses it
// (immutable sandbox, autoescape off, loop controls on):
//   * Scopes: the template's top level is one scope; each for-loop iteration,
//     macro call, `with` block and set/filter block body gets a child scope, so
//     `{% set %}` inside them does not leak out (use namespace() for that).
//     Macros see the variables of the scope they were defined in, as they are
//     when called.
//   * `a.b` tries the attribute (a method of str/dict/list, a namespace or loop
//     attribute) and then the item; `a[b]` tries the item and then the
//     attribute. A missing one is Undefined, which prints as "", is false,
//     iterates as empty, and raises an error when used in any other way.
//   * Operators, str(), truthiness and comparisons are Python's.
// Limits (RenderLimits) bound output size, strings and lists built, call depth
// (macros, recursive loops) and total work; breaching one is an error.
#pragma once

#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jinja/jinja_ast.h"
#include "jinja/jinja_value.h"

namespace pagellm::jinja {

struct RenderLimits {
  size_t max_bytes = size_t{16} << 20;       // the output, and any string or list built
  int max_call_depth = 64;                   // nested macro calls and recursive loop() calls
  uint64_t max_steps = 20'000'000;           // statements run + loop iterations
  size_t max_stack_bytes = size_t{1} << 20;  // stack the render may use below its entry
};

struct RenderOptions {
  RenderLimits limits;
  // The clock of strftime_now(); default: the local time now.
  std::function<std::tm()> now;
};

// Variables visible to a block of the template.
class Scope {
 public:
  explicit Scope(std::shared_ptr<Scope> parent = nullptr) : parent_(std::move(parent)) {}
  // Looks the name up here and in the enclosing scopes; nullptr: not found.
  const Value* find(std::string_view name) const;
  // Defines or replaces `name` in this scope.
  void set(std::string_view name, Value value);
  const std::shared_ptr<Scope>& parent() const { return parent_; }

 private:
  std::shared_ptr<Scope> parent_;
  std::vector<std::pair<std::string, Value>> vars_;
};

class Evaluator {
 public:
  explicit Evaluator(const RenderOptions& opts) : opts_(opts) {}
  // Releases the mutable objects made during the render (see Object::release).
  ~Evaluator();
  Evaluator(const Evaluator&) = delete;
  Evaluator& operator=(const Evaluator&) = delete;

  // Renders `body` in `scope`. Throws PositionedError.
  std::string render(const StmtList& body, const std::shared_ptr<Scope>& scope);

  const RenderOptions& options() const { return opts_; }

  // ---- expressions (jinja_eval_expr.cpp) ----
  Value eval(const Expr& e, const std::shared_ptr<Scope>& scope);
  // Jinja's `obj.name` and `obj[key]`.
  Value getattr(const Value& obj, std::string_view name);
  Value getitem(const Value& obj, const Value& key);
  Value call(const Value& callee, const CallArgs& args);
  // The items `for` iterates: list items, dict keys, a string's characters;
  // Undefined gives none. Others throw ValueError("'int' object is not iterable").
  ValueList iterate(const Value& v);
  Value binary(BinaryOp op, const Value& a, const Value& b);
  bool compare(CompareOp op, const Value& a, const Value& b);
  // Throws ValueError when `bytes` (a string or list about to be built) is over the limit.
  void check_size(size_t bytes, const char* what) const;

  // ---- statements (jinja_eval_stmt.cpp) ----
  enum class Flow { kNormal, kBreak, kContinue };
  Flow exec(const StmtList& body, const std::shared_ptr<Scope>& scope);
  // Renders `body` into a string of its own (macro bodies, set and filter blocks).
  std::string capture(const StmtList& body, const std::shared_ptr<Scope>& scope);
  // While alive, output goes to a string of its own.
  class Capture {
   public:
    explicit Capture(Evaluator& ev)
        : ev_(ev), saved_(ev.out_), buf_(std::make_unique<std::string>()) {
      ev_.out_ = buf_.get();
    }
    ~Capture() { ev_.out_ = saved_; }
    Capture(const Capture&) = delete;
    Capture& operator=(const Capture&) = delete;
    std::string take() { return std::move(*buf_); }

   private:
    Evaluator& ev_;
    std::string* saved_;
    std::unique_ptr<std::string> buf_;
  };
  // Renders a for loop's body over `items` (also the body of loop(...) calls).
  void run_loop(const ForStmt& loop, const Value& iterable, const std::shared_ptr<Scope>& scope,
                int depth);
  void assign(const Target& t, const Value& v, const std::shared_ptr<Scope>& scope);
  // Counts one unit of work; throws when the limit is reached.
  void step();
  // Throws when the render has used more stack than the limit allows.
  void check_stack() const;
  // Remembers a mutable object made by this render, to release it at the end.
  void track(const std::shared_ptr<Object>& obj) { made_.push_back(obj); }
  // Enters a macro or recursive-loop call; throws when nested too deeply.
  class CallGuard {
   public:
    CallGuard(Evaluator& ev, SourcePos pos);
    ~CallGuard() { --ev_.call_depth_; }
    CallGuard(const CallGuard&) = delete;
    CallGuard& operator=(const CallGuard&) = delete;

   private:
    Evaluator& ev_;
  };

 private:
  Value eval_inner(const Expr& e, const std::shared_ptr<Scope>& scope);
  Value eval_call(const CallExpr& c, const std::shared_ptr<Scope>& scope);
  CallArgs eval_args(const ArgList& args, SourcePos pos, const std::shared_ptr<Scope>& scope);
  Value eval_slice(const SliceExpr& s, const std::shared_ptr<Scope>& scope);
  Value eval_filter(const FilterExpr& f, const Value* block_text,
                    const std::shared_ptr<Scope>& scope);
  void exec_one(const Stmt& s, const std::shared_ptr<Scope>& scope, Flow& flow);
  void write(std::string_view text);

  const RenderOptions& opts_;
  std::string* out_ = nullptr;
  int call_depth_ = 0;
  uintptr_t stack_base_ = 0;  // frame address where render() began
  uint64_t steps_ = 0;
  std::vector<std::weak_ptr<Object>> made_;
};

// Escapes & < > " ' as Markup does (&amp; &lt; &gt; &#34; &#39;).
std::string html_escape(std::string_view s);

}  // namespace pagellm::jinja
