#include "plan/condition.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>
#include <vector>

namespace pto {

struct Condition::Node {
  enum Kind { Literal, Status, Context, Not, And, Or, Eq, Ne } kind;
  std::string text;  // literal value, status function name, or context path
  bool is_bool = false;
  std::shared_ptr<const Node> a, b;
};

namespace {

using NodeP = std::shared_ptr<const Condition::Node>;
using Node = Condition::Node;

struct ParseError {
  std::string message;
  std::size_t pos;
};

class Parser {
 public:
  explicit Parser(const std::string& s) : s_(s) {}
  NodeP parse_all() {
    NodeP n = parse_or();
    skip();
    if (pos_ != s_.size()) fail("unexpected '" + s_.substr(pos_, 10) + "'");
    return n;
  }
  bool has_status = false;

 private:
  [[noreturn]] void fail(const std::string& m) { throw ParseError{m, pos_}; }
  void skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool eat(const std::string& tok) {
    skip();
    if (s_.compare(pos_, tok.size(), tok) == 0) {
      pos_ += tok.size();
      return true;
    }
    return false;
  }
  NodeP make(Node::Kind k, NodeP a = nullptr, NodeP b = nullptr, std::string text = "", bool is_bool = false) {
    auto n = std::make_shared<Node>();
    n->kind = k;
    n->a = std::move(a);
    n->b = std::move(b);
    n->text = std::move(text);
    n->is_bool = is_bool;
    return n;
  }
  NodeP parse_or() {
    NodeP left = parse_and();
    while (eat("||")) left = make(Node::Or, left, parse_and());
    return left;
  }
  NodeP parse_and() {
    NodeP left = parse_unary();
    while (eat("&&")) left = make(Node::And, left, parse_unary());
    return left;
  }
  NodeP parse_unary() {
    skip();
    if (pos_ < s_.size() && s_[pos_] == '!' && (pos_ + 1 >= s_.size() || s_[pos_ + 1] != '=')) {
      ++pos_;
      if (++depth_ > 64) fail("expression nested too deeply");
      NodeP n = make(Node::Not, parse_unary());
      --depth_;
      return n;
    }
    NodeP left = parse_primary();
    if (eat("==")) return make(Node::Eq, left, parse_primary());
    if (eat("!=")) return make(Node::Ne, left, parse_primary());
    return left;
  }
  NodeP parse_primary() {
    skip();
    if (pos_ >= s_.size()) fail("expression ends too early");
    char c = s_[pos_];
    if (c == '(') {
      ++pos_;
      if (++depth_ > 64) fail("expression nested too deeply");
      NodeP n = parse_or();
      --depth_;
      if (!eat(")")) fail("missing ')'");
      return n;
    }
    if (c == '\'') {
      std::string v;
      ++pos_;
      while (true) {
        if (pos_ >= s_.size()) fail("unterminated string");
        if (s_[pos_] == '\'') {
          if (pos_ + 1 < s_.size() && s_[pos_ + 1] == '\'') {
            v += '\'';
            pos_ += 2;
            continue;
          }
          ++pos_;
          break;
        }
        v += s_[pos_++];
      }
      return make(Node::Literal, nullptr, nullptr, v);
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '-') {
      std::size_t start = pos_++;
      while (pos_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '.')) ++pos_;
      return make(Node::Literal, nullptr, nullptr, s_.substr(start, pos_ - start));
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      std::size_t start = pos_;
      while (pos_ < s_.size() &&
             (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_' || s_[pos_] == '-' ||
              s_[pos_] == '.'))
        ++pos_;
      std::string word = s_.substr(start, pos_ - start);
      if (word == "true" || word == "false") return make(Node::Literal, nullptr, nullptr, word, true);
      static const std::vector<std::string> status = {"success", "failure", "always", "cancelled"};
      if (std::find(status.begin(), status.end(), word) != status.end()) {
        if (!eat("(") || !eat(")")) fail(word + " must be called as " + word + "()");
        has_status = true;
        return make(Node::Status, nullptr, nullptr, word);
      }
      for (const char* ctx : {"matrix.", "env.", "steps.", "needs."})
        if (word.rfind(ctx, 0) == 0) {
          if (word.back() == '.') fail("'" + word + "' names no key");
          return make(Node::Context, nullptr, nullptr, word);
        }
      pos_ = start;
      fail("unsupported '" + word +
           "'; pto-runner understands success(), failure(), always(), cancelled(), the contexts matrix, env, steps "
           "and needs, literals, !, &&, ||, ==, !=");
    }
    fail(std::string("unexpected '") + c + "'");
  }

  const std::string& s_;
  std::size_t pos_ = 0;
  int depth_ = 0;
};

struct Value {
  std::string s;
  bool is_bool = false;
  bool truthy() const { return is_bool ? s == "true" : !s.empty(); }
};

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

Value eval(const Node& n, const ConditionContext& ctx) {
  auto b = [](bool v) { return Value{v ? "true" : "false", true}; };
  switch (n.kind) {
    case Node::Literal: return Value{n.text, n.is_bool};
    case Node::Status:
      if (n.text == "always") return b(true);
      if (n.text == "cancelled") return b(ctx.cancelled);
      if (n.text == "failure") return b(ctx.any_failed && !ctx.cancelled);
      return b(!ctx.any_failed && !ctx.cancelled);
    case Node::Context: {
      const std::map<std::string, std::string>* m = &ctx.values;
      std::string key = n.text;
      if (key.rfind("matrix.", 0) == 0) m = &ctx.matrix, key = key.substr(7);
      else if (key.rfind("env.", 0) == 0) m = &ctx.env, key = key.substr(4);
      auto it = m->find(key);
      return Value{it == m->end() ? "" : it->second, false};
    }
    case Node::Not: return b(!eval(*n.a, ctx).truthy());
    // GitHub: `a && b` is a when a is falsy, else b; `a || b` is a when a is truthy, else b.
    case Node::And: {
      Value a = eval(*n.a, ctx);
      return a.truthy() ? eval(*n.b, ctx) : a;
    }
    case Node::Or: {
      Value a = eval(*n.a, ctx);
      return a.truthy() ? a : eval(*n.b, ctx);
    }
    case Node::Eq:
    case Node::Ne: {
      // GitHub compares strings case-insensitively.
      bool eq = lower(eval(*n.a, ctx).s) == lower(eval(*n.b, ctx).s);
      return b(n.kind == Node::Eq ? eq : !eq);
    }
  }
  return b(false);
}

}  // namespace

std::optional<Condition> Condition::parse(const std::string& text, std::string& error, int* error_col) {
  std::string body = text;
  std::size_t offset = 0;
  auto first = body.find_first_not_of(" \t\n");
  auto last = body.find_last_not_of(" \t\n");
  if (first != std::string::npos && body.compare(first, 3, "${{") == 0 && last >= 1 &&
      body.compare(last - 1, 2, "}}") == 0 && last >= first + 4) {
    offset = first + 3;
    body = body.substr(first + 3, last - 1 - (first + 3));
  }
  if (body.find_first_not_of(" \t\n") == std::string::npos) {
    error = "empty condition";
    if (error_col) *error_col = 1;
    return std::nullopt;
  }
  Parser p(body);
  try {
    Condition c;
    c.root_ = p.parse_all();
    c.has_status_ = p.has_status;
    return c;
  } catch (const ParseError& e) {
    error = e.message;
    if (error_col) *error_col = static_cast<int>(offset + e.pos) + 1;
    return std::nullopt;
  }
}

bool Condition::evaluate(const ConditionContext& ctx) const {
  bool v = eval(*root_, ctx).truthy();
  if (!has_status_) v = v && !ctx.any_failed && !ctx.cancelled;
  return v;
}

std::string Condition::value(const ConditionContext& ctx) const { return eval(*root_, ctx).s; }

std::vector<std::string> Condition::contexts() const {
  std::vector<std::string> out;
  std::vector<const Node*> todo = {root_.get()};
  while (!todo.empty()) {
    const Node* n = todo.back();
    todo.pop_back();
    if (!n) continue;
    if (n->kind == Node::Context) out.push_back(n->text);
    todo.push_back(n->a.get());
    todo.push_back(n->b.get());
  }
  return out;
}

bool evaluate_condition_text(const std::string& text, const ConditionContext& ctx) {
  if (text.empty()) return !ctx.any_failed && !ctx.cancelled;
  std::string err;
  auto c = Condition::parse(text, err);
  return c ? c->evaluate(ctx) : false;
}

}  // namespace pto
