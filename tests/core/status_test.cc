#include "ksearch/status.h"

#include <gtest/gtest.h>

namespace ksearch {
namespace {

StatusOr<int> Half(int x) {
  if (x % 2) return InvalidArgumentError("odd: " + std::to_string(x));
  return x / 2;
}

Status UsesMacros(int x, int* out) {
  KSEARCH_ASSIGN_OR_RETURN(int h, Half(x));
  KSEARCH_RETURN_IF_ERROR(h > 10 ? OutOfRangeError("too big") : Status::Ok());
  *out = h;
  return Status::Ok();
}

TEST(Status, OkHasNoMessageAndPrintsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_TRUE(Status(StatusCode::kOk, "ignored").message().empty());
}

TEST(Status, ErrorsCarryCodeMessageAndContext) {
  Status s = NotFoundError("problem.json: missing");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.ToString(), "NOT_FOUND: problem.json: missing");
  EXPECT_EQ(s.WithContext("load").message(), "load: problem.json: missing");
}

TEST(Status, RetryableCodesAreTheTransientOnes) {
  EXPECT_TRUE(UnavailableError("x").IsRetryable());
  EXPECT_TRUE(ResourceExhaustedError("x").IsRetryable());
  EXPECT_TRUE(DeadlineExceededError("x").IsRetryable());
  EXPECT_FALSE(InvalidArgumentError("x").IsRetryable());
  EXPECT_FALSE(FailedPreconditionError("x").IsRetryable());
}

TEST(StatusOr, HoldsValueOrError) {
  EXPECT_EQ(*Half(8), 4);
  EXPECT_EQ(Half(3).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Half(3).value_or(-1), -1);
  StatusOr<int> from_ok = Status::Ok();
  EXPECT_EQ(from_ok.status().code(), StatusCode::kInternal);
}

// An error's value is a bug in the caller: the process stops at once, naming
// the error, rather than throwing through the API.
TEST(StatusOrDeathTest, TheValueOfAnErrorAbortsNamingTheError) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  StatusOr<int> error = NotFoundError("no such run 12");
  EXPECT_DEATH((void)error.value(), "StatusOr::value\\(\\) on an error: NOT_FOUND: no such run 12");
  EXPECT_DEATH((void)*Half(3), "INVALID_ARGUMENT");
  const StatusOr<std::string> text = DataLossError("torn page");
  EXPECT_DEATH((void)text->size(), "DATA_LOSS: torn page");
  StatusOr<int> fine = 2;
  EXPECT_EQ(fine.value(), 2);  // and a value is there to be taken
}

TEST(StatusOr, MacrosPropagateErrors) {
  int out = 0;
  EXPECT_TRUE(UsesMacros(8, &out).ok());
  EXPECT_EQ(out, 4);
  EXPECT_EQ(UsesMacros(7, &out).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(UsesMacros(40, &out).code(), StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace ksearch
