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
