// The syntax tree of a Jinja template (see jinja_parser.h for the grammar).
// Every node records where it starts in the source, for error messages.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/jinja_error.h"
#include "jinja/jinja_value.h"

namespace pagellm::jinja {

// ---- expressions ----

enum class ExprKind {
  kConst,    // literal
  kName,     // variable
  kAttr,     // obj.name
  kItem,     // obj[key]
  kSlice,    // obj[start:stop:step]
  kCall,     // callee(args)
  kFilter,   // input | name(args)
  kTest,     // input is name(args)
  kUnary,    // not x, -x, +x
  kBinary,   // arithmetic, ~, and, or
  kCompare,  // a == b < c, in, not in
  kCond,     // a if test else b
  kList,     // [a, b]
  kTuple,    // (a, b)
  kDict,     // {k: v}
};

// The base of expression and statement nodes.
template <class Kind>
struct AstNode {
  AstNode(Kind k, SourcePos p) : kind(k), pos(p) {}
  virtual ~AstNode() = default;
  Kind kind;
  SourcePos pos;
  // The node as its concrete type, which `kind` names.
  template <typename T>
  const T& as() const {
    return static_cast<const T&>(*this);
  }
};

struct Expr : AstNode<ExprKind> {
  using AstNode::AstNode;
};
using ExprPtr = std::unique_ptr<Expr>;

struct ConstExpr : Expr {
  ConstExpr(SourcePos p, Value v) : Expr(ExprKind::kConst, p), value(std::move(v)) {}
  Value value;
};

struct NameExpr : Expr {
  NameExpr(SourcePos p, std::string n) : Expr(ExprKind::kName, p), name(std::move(n)) {}
  std::string name;
};

struct AttrExpr : Expr {
  AttrExpr(SourcePos p, ExprPtr o, std::string n)
      : Expr(ExprKind::kAttr, p), obj(std::move(o)), name(std::move(n)) {}
  ExprPtr obj;
  std::string name;
};

struct ItemExpr : Expr {
  ItemExpr(SourcePos p, ExprPtr o, ExprPtr k)
      : Expr(ExprKind::kItem, p), obj(std::move(o)), key(std::move(k)) {}
  ExprPtr obj;
  ExprPtr key;
};

struct SliceExpr : Expr {
  explicit SliceExpr(SourcePos p) : Expr(ExprKind::kSlice, p) {}
  ExprPtr obj;
  ExprPtr start, stop, step;  // null: omitted
};

// Arguments of a call, filter or test.
struct ArgList {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
};

struct CallExpr : Expr {
  explicit CallExpr(SourcePos p) : Expr(ExprKind::kCall, p) {}
  ExprPtr callee;
  ArgList args;
};

struct FilterExpr : Expr {
  explicit FilterExpr(SourcePos p) : Expr(ExprKind::kFilter, p) {}
  ExprPtr input;  // null in {% filter %} and {% set x | f %}: the block's text
  std::string name;
  ArgList args;
};

struct TestExpr : Expr {
  explicit TestExpr(SourcePos p) : Expr(ExprKind::kTest, p) {}
  ExprPtr input;
  std::string name;
  ArgList args;
};

enum class UnaryOp { kNot, kNeg, kPos };

struct UnaryExpr : Expr {
  UnaryExpr(SourcePos p, UnaryOp o, ExprPtr e)
      : Expr(ExprKind::kUnary, p), op(o), operand(std::move(e)) {}
  UnaryOp op;
  ExprPtr operand;
};

enum class BinaryOp { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow, kConcat, kAnd, kOr };

struct BinaryExpr : Expr {
  BinaryExpr(SourcePos p, BinaryOp o, ExprPtr l, ExprPtr r)
      : Expr(ExprKind::kBinary, p), op(o), left(std::move(l)), right(std::move(r)) {}
  BinaryOp op;
  ExprPtr left, right;
};

enum class CompareOp { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };

struct CompareExpr : Expr {
  explicit CompareExpr(SourcePos p) : Expr(ExprKind::kCompare, p) {}
  ExprPtr first;
  std::vector<std::pair<CompareOp, ExprPtr>> rest;
};

struct CondExpr : Expr {
  explicit CondExpr(SourcePos p) : Expr(ExprKind::kCond, p) {}
  ExprPtr test, then, otherwise;  // otherwise null: Undefined
};

struct ListExpr : Expr {  // kList or kTuple
  ListExpr(ExprKind k, SourcePos p) : Expr(k, p) {}
  std::vector<ExprPtr> items;
};

struct DictExpr : Expr {
  explicit DictExpr(SourcePos p) : Expr(ExprKind::kDict, p) {}
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
};

// ---- statements ----

// Where `set`, `for` and `with` store values: a name, a tuple of targets
// (unpacking), or a namespace attribute (`ns.attr`, set only).
struct Target {
  enum class Kind { kName, kTuple, kNamespaceAttr };
  Kind kind = Kind::kName;
  std::string name;  // kName, kNamespaceAttr (the namespace)
  std::string attr;  // kNamespaceAttr
  std::vector<Target> items;
  SourcePos pos;
};

enum class StmtKind {
  kText,         // template data
  kPrint,        // {{ expr }}
  kIf,           // if / elif / else
  kFor,          // for / else
  kSet,          // set target = expr
  kSetBlock,     // set target [| filters] ... endset
  kMacro,        // macro name(params) ... endmacro
  kFilterBlock,  // filter f ... endfilter
  kWith,         // with a = x ... endwith
  kBreak,
  kContinue,
  kScope,  // a body rendered in place ({% generation %})
};

struct Stmt : AstNode<StmtKind> {
  using AstNode::AstNode;
};
using StmtPtr = std::unique_ptr<Stmt>;
using StmtList = std::vector<StmtPtr>;

struct TextStmt : Stmt {
  TextStmt(SourcePos p, std::string t) : Stmt(StmtKind::kText, p), text(std::move(t)) {}
  std::string text;
};

struct PrintStmt : Stmt {
  PrintStmt(SourcePos p, ExprPtr e) : Stmt(StmtKind::kPrint, p), expr(std::move(e)) {}
  ExprPtr expr;
};

struct IfStmt : Stmt {
  explicit IfStmt(SourcePos p) : Stmt(StmtKind::kIf, p) {}
  std::vector<std::pair<ExprPtr, StmtList>> branches;  // if, elif...
  StmtList otherwise;
};

struct ForStmt : Stmt {
  explicit ForStmt(SourcePos p) : Stmt(StmtKind::kFor, p) {}
  Target target;
  ExprPtr iter;
  ExprPtr filter;  // `for x in xs if cond`; null: none
  bool recursive = false;
  StmtList body;
  StmtList otherwise;  // rendered when no item was iterated
};

struct SetStmt : Stmt {
  explicit SetStmt(SourcePos p) : Stmt(StmtKind::kSet, p) {}
  Target target;
  ExprPtr value;
};

struct SetBlockStmt : Stmt {
  explicit SetBlockStmt(SourcePos p) : Stmt(StmtKind::kSetBlock, p) {}
  Target target;
  ExprPtr filter;  // a FilterExpr chain whose innermost input is null; null: none
  StmtList body;
};

struct MacroStmt : Stmt {
  explicit MacroStmt(SourcePos p) : Stmt(StmtKind::kMacro, p) {}
  std::string name;
  std::vector<std::pair<std::string, ExprPtr>> params;  // default null: required
  StmtList body;
};

struct FilterBlockStmt : Stmt {
  explicit FilterBlockStmt(SourcePos p) : Stmt(StmtKind::kFilterBlock, p) {}
  ExprPtr filter;  // a FilterExpr chain whose innermost input is null
  StmtList body;
};

struct WithStmt : Stmt {
  explicit WithStmt(SourcePos p) : Stmt(StmtKind::kWith, p) {}
  std::vector<std::pair<Target, ExprPtr>> assigns;
  StmtList body;
};

struct ScopeStmt : Stmt {
  explicit ScopeStmt(SourcePos p) : Stmt(StmtKind::kScope, p) {}
  StmtList body;
};

struct SimpleStmt : Stmt {  // break, continue
  SimpleStmt(StmtKind k, SourcePos p) : Stmt(k, p) {}
};

}  // namespace pagellm::jinja
