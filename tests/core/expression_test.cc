#include <gtest/gtest.h>

#include "ksearch/candidate.h"

namespace ksearch {
namespace {

const std::vector<std::pair<std::string, int64_t>> kValues = {{"rows", 4096}, {"cols", 65536}, {"BLOCK", 256}};

int64_t Eval(const std::string& e) {
  auto v = EvaluateExpression(e, kValues);
  EXPECT_TRUE(v.ok()) << e << ": " << v.status().ToString();
  return v.value_or(-999);
}

std::string Error(const std::string& e) {
  auto v = EvaluateExpression(e, kValues);
  EXPECT_FALSE(v.ok()) << e;
  return v.status().message();
}

TEST(Expression, EvaluatesArithmeticWithPrecedence) {
  EXPECT_EQ(Eval("1 + 2 * 3"), 7);
  EXPECT_EQ(Eval("(1 + 2) * 3"), 9);
  EXPECT_EQ(Eval("rows * cols"), 4096LL * 65536);
  EXPECT_EQ(Eval("cols / BLOCK % 7"), (65536 / 256) % 7);
  EXPECT_EQ(Eval("-BLOCK + 1"), -255);
  EXPECT_EQ(Eval("42"), 42);
}

TEST(Expression, EvaluatesFunctions) {
  EXPECT_EQ(Eval("ceil_div(cols, 1000)"), 66);
  EXPECT_EQ(Eval("ceil_div(1000, 1000)"), 1);
  EXPECT_EQ(Eval("min(rows, BLOCK)"), 256);
  EXPECT_EQ(Eval("max(rows, BLOCK * 2)"), 4096);
}

TEST(Expression, ReportsUnknownNamesAndSyntax) {
  EXPECT_NE(Error("rows * colz").find("unknown name 'colz'"), std::string::npos);
  EXPECT_NE(Error("rows +").find("unexpected end"), std::string::npos);
  EXPECT_NE(Error("(rows").find("expected ')'"), std::string::npos);
  EXPECT_NE(Error("rows / 0").find("division by zero"), std::string::npos);
  EXPECT_NE(Error("floor(rows)").find("unknown function"), std::string::npos);
  EXPECT_NE(Error("min(rows)").find("takes 2 arguments"), std::string::npos);
  EXPECT_NE(Error("1.5 * rows").find("integer"), std::string::npos);
  EXPECT_NE(Error("").find("empty"), std::string::npos);
  EXPECT_NE(Error("rows rows").find("unexpected"), std::string::npos);
}

TEST(Expression, DetectsOverflow) {
  EXPECT_NE(Error("rows * cols * rows * cols * rows").find("overflow"), std::string::npos);
  EXPECT_NE(Error("99999999999999999999").find("overflow"), std::string::npos);
}

// INT64_MIN cannot be written as a literal (its magnitude overflows first).
constexpr const char* kMin = "(-9223372036854775807 - 1)";

TEST(Expression, ComputesAtTheEdgesOfInt64) {
  EXPECT_EQ(Eval("9223372036854775807"), INT64_MAX);
  EXPECT_EQ(Eval(kMin), INT64_MIN);
  EXPECT_EQ(Eval(std::string(kMin) + " / 1"), INT64_MIN);
  EXPECT_EQ(Eval(std::string(kMin) + " % 1"), 0);
  EXPECT_EQ(Eval("9223372036854775807 / -1"), -INT64_MAX);
  EXPECT_EQ(Eval("9223372036854775807 % -1"), 0);
  EXPECT_EQ(Eval("-7 / 2"), -3);  // C semantics: truncation toward zero
  EXPECT_EQ(Eval("-7 % 2"), -1);
  EXPECT_EQ(Eval("3037000499 * 3037000499"), 3037000499LL * 3037000499LL);
  EXPECT_EQ(Eval("ceil_div(9223372036854775807, 1)"), INT64_MAX);
  EXPECT_EQ(Eval("ceil_div(9223372036854775807, 2)"), INT64_MAX / 2 + 1);
  EXPECT_EQ(Eval("ceil_div(9223372036854775807, 9223372036854775807)"), 1);
  EXPECT_EQ(Eval("ceil_div(0, 7)"), 0);
  EXPECT_EQ(Eval(std::string("min(") + kMin + ", 9223372036854775807)"), INT64_MIN);
}

TEST(Expression, ReportsEveryOverflowInsteadOfWrappingOrTrapping) {
  const std::string min = kMin;
  const std::pair<std::string, std::string> cases[] = {
      {"9223372036854775807 + 1", "64-bit overflow"},
      {min + " - 1", "64-bit overflow"},
      {"-" + min, "64-bit overflow"},
      {"0 - " + min, "64-bit overflow"},
      {"3037000500 * 3037000500", "64-bit overflow"},
      {min + " * -1", "64-bit overflow"},
      {min + " / -1", "64-bit overflow in '/' of -9223372036854775808 by -1"},
      {min + " % -1", "64-bit overflow in '%' of -9223372036854775808 by -1"},
      {"ceil_div(" + min + ", -1)", "non-negative numerator and a positive divisor"},
      {"rows / 0", "division by zero"},
      {"rows % 0", "remainder by zero"},
      {"rows / (BLOCK - 256)", "division by zero"},
      {"ceil_div(rows, 0)", "division by zero in ceil_div"},
      {"ceil_div(rows, -4)", "positive divisor"},
      {"ceil_div(-1, 4)", "non-negative numerator"},
      {"9223372036854775808", "integer literal overflows 64 bits"},
  };
  for (const auto& [expression, expected] : cases) {
    std::string message = Error(expression);
    EXPECT_NE(message.find(expected), std::string::npos)
        << expression << "\ngot: " << message << "\nexpected to contain: " << expected;
    EXPECT_NE(message.find("expression '"), std::string::npos) << message;
  }
}

TEST(Expression, BoundsNestingDepthInsteadOfOverflowingTheStack) {
  const std::string deep_parens = std::string(100000, '(') + "1" + std::string(100000, ')');
  const std::string deep_minus = std::string(100000, '-') + "1";
  // Under the length limit, so that only the depth limit can stop them.
  const std::string parens_over_depth = std::string(kMaxExpressionDepth, '(') + "1" +
                                        std::string(kMaxExpressionDepth, ')');
  const std::string minus_over_depth = std::string(kMaxExpressionDepth, '-') + "1";
  const std::string calls_over_depth = [] {
    std::string text;
    for (int i = 0; i < kMaxExpressionDepth; ++i) text += "min(1, ";
    return text + "1" + std::string(kMaxExpressionDepth, ')');
  }();
  for (const std::string& e : {parens_over_depth, minus_over_depth, calls_over_depth}) {
    EXPECT_NE(Error(e).find("nested deeper than 64 levels"), std::string::npos) << Error(e);
  }
  for (const std::string& e : {deep_parens, deep_minus}) {
    EXPECT_NE(Error(e).find("longer than the limit of 4096"), std::string::npos) << Error(e);
  }
  auto condition = EvaluateCondition(std::string(kMaxExpressionDepth, '!') + "1", kValues);
  ASSERT_FALSE(condition.ok());
  EXPECT_NE(condition.status().message().find("nested deeper"), std::string::npos);
}

TEST(Expression, AcceptsNestingUpToTheLimit) {
  // The outermost term is one level; each parenthesis or '-' adds one.
  const int inner = kMaxExpressionDepth - 1;
  EXPECT_EQ(Eval(std::string(inner, '(') + "7" + std::string(inner, ')')), 7);
  EXPECT_EQ(Eval(std::string(inner, '-') + "7"), inner % 2 ? -7 : 7);
}

TEST(Expression, BoundsLengthAndKeepsTheMessageShort) {
  std::string at_limit = "1";
  while (at_limit.size() + 4 <= kMaxExpressionLength) at_limit += " + 1";
  ASSERT_LE(at_limit.size(), kMaxExpressionLength);
  EXPECT_EQ(Eval(at_limit), static_cast<int64_t>((at_limit.size() - 1) / 4 + 1));
  std::string over = std::string(kMaxExpressionLength - 1, ' ') + "1 + 1";
  std::string message = Error(over);
  EXPECT_NE(message.find(std::to_string(over.size()) + " characters is longer than the limit of 4096"),
            std::string::npos)
      << message;
  EXPECT_LT(message.size(), 300u) << "the message quotes the whole expression";
  EXPECT_LT(Error(std::string(3000, '(')).size(), 300u);
}

TEST(Expression, RejectsComparisonsOutsideConstraints) {
  EXPECT_NE(Error("rows < 4").find("only allowed in constraints"), std::string::npos);
}

TEST(Condition, EvaluatesComparisonsAndLogic) {
  EXPECT_TRUE(*EvaluateCondition("BLOCK * 4 <= 1024 && BLOCK % 32 == 0", kValues));
  EXPECT_FALSE(*EvaluateCondition("BLOCK > 256 || rows != 4096", kValues));
  EXPECT_TRUE(*EvaluateCondition("!(BLOCK == 128)", kValues));
  EXPECT_TRUE(*EvaluateCondition("BLOCK >= 256", kValues));
  EXPECT_FALSE(EvaluateCondition("BLOCK <= ", kValues).ok());
}

}  // namespace
}  // namespace ksearch
