// The arithmetic of the half-precision strict bounds (docs/evaluation.md
// "Half precision"), without a GPU; tests/eval/gpu_half_test.cc judges kernels
// with them.
#include <gtest/gtest.h>

#include "eval/local_evaluator.h"

namespace ksearch::internal {
namespace {

TEST(HalfTolerance, OneRoundingStepIsAllowedElementwiseForHalfOutputsOnly) {
  SetTolerance tol;
  tol.rtol = 3e-6;
  tol.half_quantile = 0.0;  // the twin matched the reference nearly everywhere
  EXPECT_EQ(tol.Rtol(DType::kBF16), 1.0 / 128);
  EXPECT_EQ(tol.Rtol(DType::kF16), 1.0 / 1024);
  EXPECT_EQ(tol.Rtol(DType::kF32), 3e-6) << "fp32 outputs keep the fp32 rule";
  EXPECT_EQ(tol.Rtol(DType::kF64), 3e-6);
  tol.half_quantile = 0.02;  // a twin off by more than a step at the 99.9th percentile
  EXPECT_EQ(tol.Rtol(DType::kBF16), 0.02);
  EXPECT_EQ(tol.Rtol(DType::kF16), 0.02);
}

TEST(HalfTolerance, TheShareOfInexactElementsFollowsTheTwinAboveOnePercent) {
  EXPECT_EQ(SetTolerance::AllowedInexactFraction(8, 0.0), 0.01);
  EXPECT_EQ(SetTolerance::AllowedInexactFraction(8, 0.00015), 0.01);
  EXPECT_DOUBLE_EQ(SetTolerance::AllowedInexactFraction(8, 0.005), 0.04);
  EXPECT_EQ(SetTolerance::AllowedInexactFraction(8, 0.5), 1.0) << "never more than all of them";
  // A truncating conversion misses about half the elements: rejected unless
  // the twin itself misses more than 6%.
  EXPECT_LT(SetTolerance::AllowedInexactFraction(8, 0.06), 0.5);
}

TEST(HalfTolerance, StepsAreThoseOfTheTypes) {
  EXPECT_EQ(SetTolerance::HalfStep(DType::kBF16), 0x1p-7);
  EXPECT_EQ(SetTolerance::HalfStep(DType::kF16), 0x1p-10);
  EXPECT_EQ(SetTolerance::HalfStep(DType::kF32), 0.0);
  EXPECT_EQ(SetTolerance::HalfStep(DType::kI32), 0.0);
}

}  // namespace
}  // namespace ksearch::internal
