// The built-in search strategies (DESIGN.md "Search strategies").
//
//   ksearch::SearchOptions options;
//   options.budget.max_rounds = 8;
//   auto searcher = ksearch::MakeParameterTuneSearch(options);
//   ksearch::SearchContext context{&problem, evaluator.get()};
//   auto summary = searcher->Run(context);
//
// Thread safety: see searcher.h (one Run at a time per searcher).
#ifndef KSEARCH_STRATEGIES_H_
#define KSEARCH_STRATEGIES_H_

#include <memory>

#include "ksearch/searcher.h"

namespace ksearch {

struct ParameterTuneOptions {
  // Candidates judged per round (one Evaluate call, compiled in parallel).
  int batch_size = 16;
  // Share of each batch spent near the best point so far (one parameter moved
  // one step); the rest is drawn at random from the unexplored space.
  double local_fraction = 0.5;
  // A template space larger than this is sampled instead of enumerated.
  int64_t max_enumerated_points = 200000;
};

// Offline tuning of the problem's templates: round 0 judges the starting
// kernel and each template's default point; every later round judges a batch
// of new points that satisfy the template's constraints. Needs no IdeaGenerator
// or Brancher. Stops on the budget, when the space is exhausted
// (kCompleted), or when cancelled. Without templates it judges the starting
// kernel only.
std::unique_ptr<Searcher> MakeParameterTuneSearch(const SearchOptions& options,
                                                  const ParameterTuneOptions& tune = {});

}  // namespace ksearch

#endif  // KSEARCH_STRATEGIES_H_
