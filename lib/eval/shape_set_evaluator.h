// The judge over a problem's shape cases (docs/evaluation.md, "Shape sets").
//
// One LocalEvaluator per case, each made for the problem at that case's dims
// (Problem::AtCase), so that tolerances, the problem's sanity checks, the
// roofline floor, the baseline and the watchdog are each measured at the
// case itself. All of them share the device's primary context: while one
// case judges, the vaults of the others are sealed, and when a crash makes
// one case reset the context, the others rebuild their driver objects.
//
// A candidate compiles once; it is checked at every case, timed at every
// timed case, and its Evaluation holds one CaseResult per case. It is wrong
// if it is wrong at any case. Without dispatch buckets, the first failing
// case ends its judging; with buckets, it is judged at every case (a bucket's
// best kernel need be right only in its bucket), unless it crashed or hung.
//
// Thread safety: as Evaluator (calls are serialized).
#ifndef KSEARCH_EVAL_SHAPE_SET_EVALUATOR_H_
#define KSEARCH_EVAL_SHAPE_SET_EVALUATOR_H_

#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "eval/local_evaluator.h"

namespace ksearch::internal {

class ShapeSetEvaluator final : public Evaluator {
 public:
  ShapeSetEvaluator(Problem problem, EvaluatorOptions options);

  // Creates and calibrates the evaluator of every case. Errors: those of
  // LocalEvaluator::Initialize, naming the case.
  Status Initialize();

  std::vector<Evaluation> Evaluate(std::span<const Candidate> candidates,
                                   const std::atomic<bool>* cancel) override;
  // As LocalEvaluator::EvaluateWith (lib/eval/judge.h).
  std::vector<Evaluation> EvaluateWith(std::span<const Candidate> candidates,
                                       std::span<const CompileResult> precompiled,
                                       const std::atomic<bool>* cancel);
  const Problem& problem() const override { return problem_; }
  // The first timed case's device figures and reference / baseline times.
  const DeviceInfo& device() const override;
  std::optional<TimingStats> reference_timing() const override;
  std::optional<TimingStats> baseline_timing() const override;
  Status health() const override;

 private:
  // One candidate's verdict from its per-case evaluations (null: not judged
  // at that case).
  Evaluation Combine(const std::vector<const Evaluation*>& at_case) const;
  // Seals every vault but case `active`'s, which is unsealed.
  Status Activate(size_t active);

  Problem problem_;
  EvaluatorOptions options_;
  std::vector<ShapeCase> cases_;
  size_t first_timed_ = 0;
  std::vector<std::unique_ptr<LocalEvaluator>> evaluators_;  // one per case
  std::mutex mutex_;
};

}  // namespace ksearch::internal

#endif  // KSEARCH_EVAL_SHAPE_SET_EVALUATOR_H_
