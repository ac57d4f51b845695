// How a library baseline chooses among its library's own candidates (cuBLASLt's
// heuristic algorithms, cuDNN's engine configurations, cuDNN's convolution
// algorithms): by timing them on operands like real inputs, robustly against
// the clock of a GPU that has just idled (docs/evaluation.md, "The library's
// best algorithm, not the one timed first").
//
// A GPU that has been idle clocks high for its first milliseconds of load
// and slows as it heats, so a candidate timed early looks faster than it is
// (on the H200, cuBLASLt algorithms 3–6% slower won that way). ChooseFastest
// therefore first runs all candidates in turn, untimed, for a while; then it
// times as many rounds as there are candidates (a few at least), each giving
// every candidate one turn of back-to-back runs, the order rotated by one
// each round so that each candidate takes each place once; the lowest median
// turn wins.
//
// Thread safety: free functions; the caller owns the stream and context.
#ifndef KSEARCH_BASELINES_FASTEST_H_
#define KSEARCH_BASELINES_FASTEST_H_

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "cuda/driver.h"
#include "ksearch/problem.h"
#include "ksearch/status.h"

namespace ksearch::internal {

struct ChoiceSchedule {
  float warm_ms = 100;       // untimed, all candidates in turn, before the rounds
  int max_warm_passes = 50;  // however short the candidates are
  int min_rounds = 5;        // rounds = max(candidates that ran, min_rounds)
  int timed_runs = 2;        // back-to-back runs in one turn
};

// One timed turn: enqueues `runs` back-to-back runs of candidate `index` and
// returns the ms a run took. An error on a candidate's first (warm-up) turn
// drops that candidate; an error later ends the choice with it.
using TurnFunction = std::function<StatusOr<float>(size_t index, int runs)>;

struct Choice {
  size_t best = 0;               // index of the fastest candidate
  std::vector<size_t> ran;       // the candidates that ran, in index order
  std::vector<float> median_ms;  // their median turn, parallel to `ran`
  std::vector<Status> dropped;   // why the others did not run
};

// Times candidates 0 … count-1 as described above. Errors: kInternal when
// none runs (the message gives the first candidate's reason), or the error
// of a later turn.
StatusOr<Choice> ChooseFastest(size_t count, const TurnFunction& turn,
                               const ChoiceSchedule& schedule = {});

// A TurnFunction that times `run(index, stream)` with events on `stream`.
TurnFunction EventTurns(const DriverApi& api, CUstream stream, CUevent start, CUevent end,
                        std::function<Status(size_t index, CUstream stream)> run);

// Fills `count` elements of `type` (kBF16, kF16 or kF32) at `buffer` with a
// fixed pseudo-random pattern: magnitudes 2^-9 to 1, either sign. These are
// the bit patterns of real inputs, with the power they draw (constant
// operands keep the tensor cores cooler than the judge's inputs do).
Status FillPattern(const DriverApi& api, CUdeviceptr buffer, uint64_t count, DType type,
                   CUstream stream);

}  // namespace ksearch::internal

#endif  // KSEARCH_BASELINES_FASTEST_H_
