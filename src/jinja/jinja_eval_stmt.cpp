// Statements: output, if, for (with the loop object), set, macros, filter and
// with blocks; scopes; the work and depth limits.
#include <algorithm>

#include "jinja/jinja_builtins.h"
#include "jinja/jinja_eval.h"

namespace pagellm::jinja {
namespace {

// A macro defined by {% macro %}; sees the scope it was defined in.
class MacroObject : public Object {
 public:
  MacroObject(const MacroStmt* stmt, const std::shared_ptr<Scope>& scope)
      : stmt_(stmt), scope_(scope) {}

  std::string type_name() const override { return "Macro"; }
  std::string repr() const override { return "<Macro '" + stmt_->name + "'>"; }
  bool callable() const override { return true; }
  std::optional<Value> attr(std::string_view name) const override {
    if (name == "name") return Value(stmt_->name);
    return std::nullopt;
  }

  Value call(Evaluator& ev, const CallArgs& args) override {
    Evaluator::CallGuard guard(ev, args.pos);
    std::shared_ptr<Scope> parent = scope_.lock();
    if (!parent) throw ValueError("macro '" + stmt_->name + "' called after its scope ended");
    const auto& params = stmt_->params;
    if (args.args.size() > params.size()) {
      throw ValueError("macro '" + stmt_->name + "' takes not more than " +
                       std::to_string(params.size()) + " argument(s)");
    }
    for (const auto& [k, v] : args.kwargs) {
      bool known = false;
      for (size_t i = 0; i < params.size(); ++i) {
        if (params[i].first != k) continue;
        if (i < args.args.size()) {
          throw ValueError("macro '" + stmt_->name + "' got multiple values for argument '" + k +
                           "'");
        }
        known = true;
      }
      if (!known) {
        throw ValueError("macro '" + stmt_->name + "' takes no keyword argument '" + k + "'");
      }
    }
    auto scope = std::make_shared<Scope>(parent);
    for (size_t i = 0; i < params.size(); ++i) {
      const auto& [name, def] = params[i];
      std::optional<Value> v = args.get(i, name);
      if (!v) {
        v = def ? ev.eval(*def, scope)
                : Value::undefined("parameter '" + name + "' was not provided");
      }
      scope->set(name, std::move(*v));
    }
    return Value(ev.capture(stmt_->body, scope));
  }

 private:
  const MacroStmt* stmt_;
  std::weak_ptr<Scope> scope_;  // weak: the scope holds the macro
};

// The `loop` variable of a for loop.
class LoopObject : public Object, public std::enable_shared_from_this<LoopObject> {
 public:
  LoopObject(std::shared_ptr<const ValueList> items, int depth, const ForStmt* stmt,
             const std::shared_ptr<Scope>& scope)
      : items_(std::move(items)), depth_(depth), stmt_(stmt), scope_(scope) {}

  size_t index = 0;

  std::string type_name() const override { return "LoopContext"; }
  std::string repr() const override {
    return "<LoopContext " + std::to_string(index + 1) + "/" + std::to_string(items_->size()) + ">";
  }
  bool callable() const override { return true; }

  std::optional<Value> attr(std::string_view name) const override {
    const auto n = static_cast<int64_t>(items_->size());
    const auto i = static_cast<int64_t>(index);
    if (name == "index") return Value(i + 1);
    if (name == "index0") return Value(i);
    if (name == "revindex") return Value(n - i);
    if (name == "revindex0") return Value(n - i - 1);
    if (name == "first") return Value(i == 0);
    if (name == "last") return Value(i + 1 == n);
    if (name == "length") return Value(n);
    if (name == "depth") return Value(int64_t{depth_});
    if (name == "depth0") return Value(int64_t{depth_ - 1});
    if (name == "previtem") {
      return i > 0 ? (*items_)[i - 1] : Value::undefined("there is no previous item");
    }
    if (name == "nextitem") {
      return i + 1 < n ? (*items_)[i + 1] : Value::undefined("there is no next item");
    }
    if (name == "cycle") {
      auto self = std::const_pointer_cast<LoopObject>(shared_from_this());
      return make_function("cycle", [self](Evaluator&, const CallArgs& a) -> Value {
        if (a.args.empty()) throw ValueError("no items for cycling given");
        return a.args[self->index % a.args.size()];
      });
    }
    if (name == "changed") {
      auto self = std::const_pointer_cast<LoopObject>(shared_from_this());
      return make_function("changed", [self](Evaluator&, const CallArgs& a) -> Value {
        Value now = Value::tuple(a.args);
        if (self->has_last_ && equals(self->last_changed_, now)) return Value(false);
        self->has_last_ = true;
        self->last_changed_ = now;
        return Value(true);
      });
    }
    return std::nullopt;
  }

  // loop(items) in a recursive loop renders the loop body over `items`.
  Value call(Evaluator& ev, const CallArgs& args) override {
    if (!stmt_->recursive) {
      throw ValueError(
          "Tried to call non recursive loop. Maybe you forgot the 'recursive' modifier.");
    }
    args.check("loop", {"iterable"});
    if (args.args.empty()) throw ValueError("loop() takes exactly one argument");
    std::shared_ptr<Scope> scope = scope_.lock();
    if (!scope) throw ValueError("loop() called after its loop ended");
    Evaluator::CallGuard guard(ev, args.pos);
    Evaluator::Capture capture(ev);
    ev.run_loop(*stmt_, args.args[0], scope, depth_ + 1);
    return Value(capture.take());
  }

  void release() override { last_changed_ = Value(); }

 private:
  std::shared_ptr<const ValueList> items_;
  int depth_;
  const ForStmt* stmt_;
  std::weak_ptr<Scope> scope_;  // weak: a namespace may keep the loop object
  bool has_last_ = false;
  Value last_changed_;
};

}  // namespace

const Value* Scope::find(std::string_view name) const {
  for (const Scope* s = this; s; s = s->parent_.get()) {
    for (const auto& [k, v] : s->vars_) {
      if (k == name) return &v;
    }
  }
  return nullptr;
}

void Scope::set(std::string_view name, Value value) {
  for (auto& [k, v] : vars_) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  vars_.emplace_back(std::string(name), std::move(value));
}

Evaluator::CallGuard::CallGuard(Evaluator& ev, SourcePos) : ev_(ev) {
  if (++ev_.call_depth_ > ev_.opts_.limits.max_call_depth) {
    --ev_.call_depth_;
    throw ValueError("calls nested too deeply (more than " +
                     std::to_string(ev_.opts_.limits.max_call_depth) +
                     " levels): does a macro call itself without end?");
  }
}

Evaluator::~Evaluator() {
  for (const auto& w : made_) {
    if (auto obj = w.lock()) obj->release();
  }
}

void Evaluator::step() {
  if (++steps_ > opts_.limits.max_steps) {
    throw ValueError("the template ran too long (more than " +
                     std::to_string(opts_.limits.max_steps) + " steps)");
  }
}

void Evaluator::write(std::string_view text) {
  if (out_->size() + text.size() > opts_.limits.max_bytes) {
    throw ValueError("the output is too large (more than " +
                     std::to_string(opts_.limits.max_bytes) + " bytes)");
  }
  out_->append(text);
}

void Evaluator::check_stack() const {
  const auto here = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  if (stack_base_ > here && stack_base_ - here > opts_.limits.max_stack_bytes) {
    throw ValueError("the template nested too deeply (more than " +
                     std::to_string(opts_.limits.max_stack_bytes) + " bytes of stack)");
  }
}

std::string Evaluator::render(const StmtList& body, const std::shared_ptr<Scope>& scope) {
  stack_base_ = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  Capture capture(*this);
  exec(body, scope);
  return capture.take();
}

std::string Evaluator::capture(const StmtList& body, const std::shared_ptr<Scope>& scope) {
  Capture capture(*this);
  exec(body, scope);
  return capture.take();
}

Evaluator::Flow Evaluator::exec(const StmtList& body, const std::shared_ptr<Scope>& scope) {
  Flow flow = Flow::kNormal;
  for (const auto& s : body) {
    exec_one(*s, scope, flow);
    if (flow != Flow::kNormal) break;
  }
  return flow;
}

void Evaluator::exec_one(const Stmt& s, const std::shared_ptr<Scope>& scope, Flow& flow) {
  try {
    step();
    check_stack();
    switch (s.kind) {
      case StmtKind::kText:
        write(s.as<TextStmt>().text);
        return;
      case StmtKind::kPrint: {
        const Value v = eval(*s.as<PrintStmt>().expr, scope);
        write(v.to_str());
        return;
      }
      case StmtKind::kIf: {
        const auto& st = s.as<IfStmt>();
        for (const auto& [cond, body] : st.branches) {
          if (eval(*cond, scope).truthy()) {
            flow = exec(body, scope);
            return;
          }
        }
        flow = exec(st.otherwise, scope);
        return;
      }
      case StmtKind::kFor: {
        const auto& st = s.as<ForStmt>();
        run_loop(st, eval(*st.iter, scope), scope, 1);
        return;
      }
      case StmtKind::kSet: {
        const auto& st = s.as<SetStmt>();
        assign(st.target, eval(*st.value, scope), scope);
        return;
      }
      case StmtKind::kSetBlock: {
        const auto& st = s.as<SetBlockStmt>();
        Value v(capture(st.body, std::make_shared<Scope>(scope)));
        if (st.filter) v = eval_filter(st.filter->as<FilterExpr>(), &v, scope);
        assign(st.target, v, scope);
        return;
      }
      case StmtKind::kMacro: {
        const auto& st = s.as<MacroStmt>();
        scope->set(st.name, Value::object(std::make_shared<MacroObject>(&st, scope)));
        return;
      }
      case StmtKind::kFilterBlock: {
        const auto& st = s.as<FilterBlockStmt>();
        const Value text(capture(st.body, std::make_shared<Scope>(scope)));
        write(eval_filter(st.filter->as<FilterExpr>(), &text, scope).to_str());
        return;
      }
      case StmtKind::kWith: {
        const auto& st = s.as<WithStmt>();
        auto inner = std::make_shared<Scope>(scope);
        for (const auto& [target, expr] : st.assigns) assign(target, eval(*expr, scope), inner);
        flow = exec(st.body, inner);
        return;
      }
      case StmtKind::kBreak:
        flow = Flow::kBreak;
        return;
      case StmtKind::kContinue:
        flow = Flow::kContinue;
        return;
      case StmtKind::kScope:
        flow = exec(s.as<ScopeStmt>().body, scope);
        return;
    }
  } catch (const ValueError& err) {
    throw PositionedError{s.pos, err.what()};
  } catch (const std::logic_error& err) {
    throw PositionedError{s.pos, err.what()};
  }
}

void Evaluator::run_loop(const ForStmt& loop, const Value& iterable,
                         const std::shared_ptr<Scope>& scope, int depth) {
  ValueList items = iterate(iterable);
  if (loop.filter) {
    ValueList kept;
    for (Value& item : items) {
      step();
      auto s = std::make_shared<Scope>(scope);
      assign(loop.target, item, s);
      if (eval(*loop.filter, s).truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    exec(loop.otherwise, std::make_shared<Scope>(scope));
    return;
  }
  auto shared = std::make_shared<const ValueList>(std::move(items));
  auto ctx = std::make_shared<LoopObject>(shared, depth, &loop, scope);
  track(ctx);
  const Value ctx_value = Value::object(ctx);
  for (size_t i = 0; i < shared->size(); ++i) {
    step();
    ctx->index = i;
    auto s = std::make_shared<Scope>(scope);
    assign(loop.target, (*shared)[i], s);
    s->set("loop", ctx_value);
    if (exec(loop.body, s) == Flow::kBreak) break;
  }
}

void Evaluator::assign(const Target& t, const Value& v, const std::shared_ptr<Scope>& scope) {
  switch (t.kind) {
    case Target::Kind::kName:
      scope->set(t.name, v);
      return;
    case Target::Kind::kTuple: {
      if (!v.is_list() && !v.is_dict() && !v.is_string() && !v.is_undefined()) {
        throw PositionedError{t.pos, "cannot unpack non-iterable " + v.type_name() + " object"};
      }
      const ValueList items = iterate(v);
      if (items.size() != t.items.size()) {
        if (items.size() > t.items.size()) {
          throw PositionedError{
              t.pos, "too many values to unpack (expected " + std::to_string(t.items.size()) + ")"};
        }
        throw PositionedError{t.pos, "not enough values to unpack (expected " +
                                         std::to_string(t.items.size()) + ", got " +
                                         std::to_string(items.size()) + ")"};
      }
      for (size_t i = 0; i < items.size(); ++i) assign(t.items[i], items[i], scope);
      return;
    }
    case Target::Kind::kNamespaceAttr: {
      const Value* ns = scope->find(t.name);
      if (!ns) throw PositionedError{t.pos, "'" + t.name + "' is undefined"};
      if (!ns->is_object() || !ns->object().set_attr(t.attr, v)) {
        throw PositionedError{t.pos, "cannot assign attribute on non-namespace object"};
      }
      return;
    }
  }
}

}  // namespace pagellm::jinja
