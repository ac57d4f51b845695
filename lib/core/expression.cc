// The integer expression grammar of launch plans and template constraints:
//
//   condition := or
//   or        := and ('||' and)*
//   and       := cmp ('&&' cmp)*
//   cmp       := sum (('=='|'!='|'<'|'<='|'>'|'>=') sum)?
//   sum       := term (('+'|'-') term)*
//   term      := unary (('*'|'/'|'%') unary)*
//   unary     := ('-'|'!') unary | primary
//   primary   := INTEGER | NAME | NAME '(' condition (',' condition)* ')' | '(' condition ')'
//
// Plain expressions reject the boolean operators so that a typo such as
// "rows < 4" in a grid is reported rather than silently evaluated to 0 or 1.
//
// Expressions come from remote models, so evaluation is total: every operation
// is checked 64-bit arithmetic (an overflow is an error, never a wrapped value
// or a SIGFPE), and the recursive descent is bounded by kMaxExpressionDepth so
// that no input can exhaust the stack.
#include <cctype>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ksearch/candidate.h"

namespace ksearch {
namespace {

using Values = std::vector<std::pair<std::string, int64_t>>;

class Parser {
 public:
  Parser(std::string_view text, const Values& values, bool allow_boolean)
      : text_(text), values_(values), allow_boolean_(allow_boolean) {}

  StatusOr<int64_t> Parse() {
    if (text_.size() > kMaxExpressionLength) {
      return InvalidArgumentError("expression " + Quoted() + ": " + std::to_string(text_.size()) +
                                  " characters is longer than the limit of " +
                                  std::to_string(kMaxExpressionLength));
    }
    if (Trimmed().empty()) {
      Error("empty expression");
      return Fail();
    }
    int64_t value = Or();
    if (!error_.empty()) return Fail();
    SkipSpace();
    if (pos_ != text_.size()) {
      Error("unexpected '" + std::string(text_.substr(pos_, 1)) + "'");
      return Fail();
    }
    return value;
  }

 private:
  std::string_view Trimmed() const {
    size_t b = text_.find_first_not_of(" \t\n");
    return b == std::string_view::npos ? std::string_view() : text_.substr(b);
  }

  // Records the first error; returns 0 so that callers can `return Error(…)`.
  int64_t Error(std::string message) {
    if (error_.empty()) {
      error_ = std::move(message);
      error_pos_ = pos_;
    }
    return 0;
  }
  Status Fail() const {
    return InvalidArgumentError("expression " + Quoted() + ": " + error_ + " at offset " +
                                std::to_string(error_pos_));
  }
  // The expression in quotes, cut short so that a hostile 4 KiB expression does
  // not fill the log and the next repair prompt.
  std::string Quoted() const {
    static constexpr size_t kShown = 80;
    if (text_.size() <= kShown) return "'" + std::string(text_) + "'";
    return "'" + std::string(text_.substr(0, kShown)) + "...'";
  }

  void SkipSpace() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool Accept(std::string_view token) {
    SkipSpace();
    if (text_.substr(pos_, token.size()) == token) {
      // '<' must not swallow the first character of '<=', nor '|' of '||'.
      pos_ += token.size();
      return true;
    }
    return false;
  }
  bool Peek(std::string_view token) {
    SkipSpace();
    return text_.substr(pos_, token.size()) == token;
  }

  int64_t Overflow() { return Error("64-bit overflow"); }

  int64_t Boolean(std::string_view op, int64_t value) {
    if (!allow_boolean_) Error("'" + std::string(op) + "' is only allowed in constraints");
    return value;
  }

  int64_t Or() {
    int64_t left = And();
    while (error_.empty() && Accept("||")) {
      int64_t right = And();
      left = Boolean("||", (left != 0) || (right != 0));
    }
    return left;
  }
  int64_t And() {
    int64_t left = Compare();
    while (error_.empty() && Accept("&&")) {
      int64_t right = Compare();
      left = Boolean("&&", (left != 0) && (right != 0));
    }
    return left;
  }
  int64_t Compare() {
    int64_t left = Sum();
    if (!error_.empty()) return 0;
    static constexpr std::string_view kOps[] = {"==", "!=", "<=", ">=", "<", ">"};
    for (std::string_view op : kOps) {
      if (Accept(op)) {
        int64_t right = Sum();
        bool result = op == "==" ? left == right
                      : op == "!=" ? left != right
                      : op == "<=" ? left <= right
                      : op == ">=" ? left >= right
                      : op == "<"  ? left < right
                                   : left > right;
        return Boolean(op, result);
      }
    }
    return left;
  }
  int64_t Sum() {
    int64_t left = Term();
    while (error_.empty()) {
      int64_t result = 0;
      if (Accept("+")) {
        int64_t right = Term();
        left = __builtin_add_overflow(left, right, &result) ? Overflow() : result;
      } else if (Accept("-")) {
        int64_t right = Term();
        left = __builtin_sub_overflow(left, right, &result) ? Overflow() : result;
      } else {
        break;
      }
    }
    return left;
  }
  int64_t Term() {
    int64_t left = Unary();
    while (error_.empty()) {
      int64_t result = 0;
      if (Accept("*")) {
        int64_t right = Unary();
        left = __builtin_mul_overflow(left, right, &result) ? Overflow() : result;
      } else if (Peek("/") || Peek("%")) {
        bool divide = Accept("/");
        if (!divide) Accept("%");
        int64_t right = Unary();
        if (!error_.empty()) return 0;
        if (right == 0) return Error(divide ? "division by zero" : "remainder by zero");
        // The one quotient that does not fit: the CPU traps on it (SIGFPE) for
        // both '/' and '%', so the remainder, although 0, is an error too.
        if (left == INT64_MIN && right == -1) {
          return Error(std::string("64-bit overflow in ") + (divide ? "'/'" : "'%'") +
                       " of -9223372036854775808 by -1");
        }
        left = divide ? left / right : left % right;
      } else {
        break;
      }
    }
    return left;
  }
  // Every recursion of the grammar passes through Unary (a unary operator, or
  // a parenthesis or call via Primary), so counting here bounds the stack.
  int64_t Unary() {
    if (depth_ >= kMaxExpressionDepth) {
      return Error("nested deeper than " + std::to_string(kMaxExpressionDepth) +
                   " levels (parentheses, calls and unary operators)");
    }
    ++depth_;
    int64_t value = UnaryAtDepth();
    --depth_;
    return value;
  }
  int64_t UnaryAtDepth() {
    if (Peek("!=")) return Error("unexpected '!='");
    if (Accept("-")) {
      int64_t value = Unary();
      int64_t result = 0;
      return __builtin_sub_overflow(int64_t{0}, value, &result) ? Overflow() : result;
    }
    if (Accept("!")) return Boolean("!", Unary() == 0);
    return Primary();
  }
  int64_t Primary() {
    SkipSpace();
    if (pos_ >= text_.size()) return Error("unexpected end");
    char c = text_[pos_];
    if (Accept("(")) {
      int64_t value = Or();
      if (!Accept(")")) return Error("expected ')'");
      return value;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      int64_t value = 0;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
        int64_t digit = text_[pos_++] - '0';
        if (__builtin_mul_overflow(value, 10, &value) ||
            __builtin_add_overflow(value, digit, &value)) {
          return Error("integer literal overflows 64 bits");
        }
      }
      if (pos_ < text_.size() && (text_[pos_] == '.' || std::isalpha(static_cast<unsigned char>(text_[pos_])))) {
        return Error("only integer literals are allowed");
      }
      return value;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t start = pos_;
      while (pos_ < text_.size() &&
             (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) {
        ++pos_;
      }
      std::string name(text_.substr(start, pos_ - start));
      if (Accept("(")) return Call(name, start);
      for (const auto& [key, value] : values_) {
        if (key == name) return value;
      }
      pos_ = start;
      return Error("unknown name '" + name + "'");
    }
    return Error("unexpected '" + std::string(1, c) + "'");
  }
  int64_t Call(const std::string& name, size_t start) {
    std::vector<int64_t> args;
    if (!Accept(")")) {
      do {
        args.push_back(Or());
        if (!error_.empty()) return 0;
      } while (Accept(","));
      if (!Accept(")")) return Error("expected ')' after arguments of " + name);
    }
    auto need = [&](size_t n) {
      if (args.size() != n) {
        pos_ = start;
        Error(name + "() takes " + std::to_string(n) + " arguments, got " +
              std::to_string(args.size()));
        return false;
      }
      return true;
    };
    if (name == "ceil_div") {
      if (!need(2)) return 0;
      if (args[1] == 0) return Error("division by zero in ceil_div");
      if (args[0] >= 0 && args[1] > 0) return args[0] / args[1] + (args[0] % args[1] != 0);
      return Error("ceil_div needs a non-negative numerator and a positive divisor");
    }
    if (name == "min") return need(2) ? std::min(args[0], args[1]) : 0;
    if (name == "max") return need(2) ? std::max(args[0], args[1]) : 0;
    pos_ = start;
    return Error("unknown function '" + name + "' (known: ceil_div, min, max)");
  }

  std::string_view text_;
  const Values& values_;
  bool allow_boolean_;
  size_t pos_ = 0;
  int depth_ = 0;
  std::string error_;
  size_t error_pos_ = 0;
};

}  // namespace

StatusOr<int64_t> EvaluateExpression(std::string_view expression, const Values& values) {
  return Parser(expression, values, /*allow_boolean=*/false).Parse();
}

StatusOr<bool> EvaluateCondition(std::string_view condition, const Values& values) {
  KSEARCH_ASSIGN_OR_RETURN(int64_t value, Parser(condition, values, /*allow_boolean=*/true).Parse());
  return value != 0;
}

}  // namespace ksearch
