// Judging cubins compiled elsewhere with the in-process evaluator.
//
// The worker pool compiles candidates on the orchestrator's CPUs and ships the
// cubins; the worker process then runs only the GPU part of the judge. This is
// the entry point it uses (implemented in local_evaluator.cc, which owns the
// evaluator's internals).
//
// Thread safety: as Evaluator::Evaluate (calls are serialized per evaluator).
#ifndef KSEARCH_EVAL_JUDGE_H_
#define KSEARCH_EVAL_JUDGE_H_

#include <atomic>
#include <span>
#include <vector>

#include "cuda/compiler.h"
#include "ksearch/evaluator.h"

namespace ksearch::internal {

// Like evaluator.Evaluate(candidates, cancel), with compiled[i] taken as the
// compile of candidates[i] instead of compiling it. Each CompileResult must
// target the evaluator's device arch (a cubin for another arch is a
// kLaunchError from the module load). compile_ms and compile_cached of the
// evaluations are left for the caller to fill in.
// Errors: kInvalidArgument when `evaluator` was not made by
// CreateLocalEvaluator or the spans differ in length.
StatusOr<std::vector<Evaluation>> EvaluatePrecompiled(Evaluator& evaluator,
                                                      std::span<const Candidate> candidates,
                                                      std::span<const CompileResult> compiled,
                                                      const std::atomic<bool>* cancel = nullptr);

}  // namespace ksearch::internal

#endif  // KSEARCH_EVAL_JUDGE_H_
