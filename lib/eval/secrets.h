// Where the judge's unpredictable choices come from: each run's input seed
// and whether a timed run is checked (docs/evaluation.md, "Secrets").
//
// An adversary who has read the judge knows every formula it uses, so no
// formula may connect what a kernel can observe (its inputs and outputs,
// the clock, how often it was launched) to what comes next. By default every
// value is drawn from the operating system's randomness (getrandom) at the
// moment it is used, and never reaches the device before that: the inputs of
// one run say nothing about the next run's inputs or about which runs will
// be checked. A replay seed (EvaluatorOptions::replay_input_seed) makes the
// sequence a fixed function of the seed instead, so that a test or a replay
// gets the same inputs again; a kernel that knows that seed can predict its
// inputs, which is why it is never the default.
//
// Thread safety: one object per evaluator, used under its lock.
#ifndef KSEARCH_EVAL_SECRETS_H_
#define KSEARCH_EVAL_SECRETS_H_

#include <cstdint>

#include "ksearch/status.h"

namespace ksearch::internal {

class JudgeSecrets {
 public:
  // replay_seed 0: the operating system's randomness; otherwise the fixed
  // sequence of that seed.
  explicit JudgeSecrets(uint64_t replay_seed = 0) : replay_seed_(replay_seed) {}

  // Whether the operating system's randomness can be read here (the judge
  // refuses to start otherwise, rather than fall back to something a kernel
  // could predict).
  static Status CheckAvailable();

  // A fresh 64-bit value: an input seed.
  uint64_t Next();
  // True with probability p (clamped to [0, 1]): a spot-check decision.
  bool Chance(double p);

  bool replay() const { return replay_seed_ != 0; }

 private:
  uint64_t replay_seed_;
  uint64_t counter_ = 0;
};

}  // namespace ksearch::internal

#endif  // KSEARCH_EVAL_SECRETS_H_
