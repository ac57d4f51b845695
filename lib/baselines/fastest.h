// How a library baseline chooses among its library's own candidates (cuBLASLt's
// heuristic algorithms, cuDNN's engine configurations, cuDNN's convolution
// algorithms): by timing them on operands like real inputs, robustly against
// the clock of a GPU that has just idled (docs/evaluation.md, "The library's
// best algorithm, not the one timed first").
//
// A GPU that has been idle clocks high for its first milliseconds of load
// and slows as it heats, so a candidate timed early looks faster than it is
// (on the H200, cuBLASLt algorithms 3–6% slower won that way); under
// sustained load it slows further, and not every candidate alike. The judge
// times between those two states: a warm GPU that rests between runs.
// ChooseFastest therefore first runs all candidates in turn, untimed, for a
// while; then it times as many rounds as there are candidates (a few at
// least), each giving every candidate one turn, the order rotated by one
// each round so that each candidate takes each place once; the GPU rests
// after every turn about as long as the turn kept it busy; the lowest
// median turn wins.
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
#include "cuda/objects.h"
#include "ksearch/problem.h"
#include "ksearch/status.h"

namespace ksearch::internal {

struct ChoiceSchedule {
  float warm_ms = 100;       // untimed, all candidates in turn, before the rounds
  int max_warm_passes = 50;  // however short the candidates are
  int min_rounds = 5;        // rounds = max(candidates that ran, min_rounds)
  int timed_runs = 2;        // runs in one turn
  // After every turn (warm-up included) the GPU rests: `rest` is called with
  // rest_ratio times the time the turn's runs took. The judge's runs come
  // between host work (generating inputs, checking guards), so its GPU is
  // never under sustained load; a choice that keeps the GPU busy for a tenth
  // of a second times the candidates at a lower clock than the judge does,
  // and they do not slow alike (linear square on the H200: cuBLASLt's
  // algorithm 0 took 0.193 ms under sustained load, 0.175 rested; algorithm
  // 5 0.189 and 0.184).
  float rest_ratio = 1.0f;
  std::function<void(double ms)> rest;  // empty: the host sleeps that long
};

// One timed turn: times `runs` runs of candidate `index` and returns the ms
// a run took (their mean). An error on a candidate's first (warm-up) turn
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

// The bytes the judge's L2 flush writes on a device with `l2_bytes` of L2:
// twice the L2 (of 8 MiB at least). The evaluator and the choice's flush
// (AllocateL2Flush) both size theirs so.
int64_t L2FlushBytes(int64_t l2_bytes);

// A buffer of L2FlushBytes for the current context's device, for
// EventTurns' flush. Errors: the driver's, naming the call.
StatusOr<DeviceBuffer> AllocateL2Flush(const DriverApi& api);

// A TurnFunction that times `run(index, stream)` as the judge times a run:
// each run after an L2 flush (a memset of `flush` with a new value each time;
// none when `flush` is null), alone between two events, the host waiting for
// it before the next is queued; an untimed run of the same candidate leads
// each turn, so that what a library does when it switches algorithms stays
// out of the timed runs (the judge never switches). A turn of n runs returns
// their mean.
TurnFunction EventTurns(const DriverApi& api, CUstream stream, CUevent start, CUevent end,
                        const DeviceBuffer* flush,
                        std::function<Status(size_t index, CUstream stream)> run);

// Fills `count` elements of `type` (kBF16, kF16 or kF32) at `buffer` with
// normal(0, 1) values (a fixed sequence of 2 Mi draws, repeated), rounded to
// the type: the values of the judge's "normal" input set.
Status FillNormal(const DriverApi& api, CUdeviceptr buffer, uint64_t count, DType type,
                  CUstream stream);

}  // namespace ksearch::internal

#endif  // KSEARCH_BASELINES_FASTEST_H_
