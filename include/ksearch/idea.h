// Idea: one optimization idea in natural language, the parent it applies to,
// and — once its branches are judged — its outcome in words, which later idea
// prompts read.
//
// Thread safety: plain values.
#ifndef KSEARCH_IDEA_H_
#define KSEARCH_IDEA_H_

#include <array>
#include <string>
#include <string_view>

namespace ksearch {

// The six categories of the method (docs/search.md).
enum class IdeaCategory {
  kMemoryAccess,    // global/shared/register hierarchy, coalescing, vector width
  kAsynchrony,      // latency hiding, async copies, pipelining
  kDataTypes,       // data types and precision (within the tolerance policy)
  kCompute,         // instruction count, math, fusion of work
  kParallelism,     // occupancy, work per thread/block, grid shape
  kControlFlow,     // loops, branches, indexing, unrolling
};
inline constexpr std::array<IdeaCategory, 6> kAllIdeaCategories = {
    IdeaCategory::kMemoryAccess, IdeaCategory::kAsynchrony, IdeaCategory::kDataTypes,
    IdeaCategory::kCompute,      IdeaCategory::kParallelism, IdeaCategory::kControlFlow};

// "memory_access", "asynchrony", "data_types", "compute", "parallelism",
// "control_flow".
std::string_view ToString(IdeaCategory category);
bool ParseIdeaCategory(std::string_view text, IdeaCategory* out);

struct Idea {
  std::string id;          // unique within a run
  std::string parent_id;   // the candidate it applies to
  int round = 0;
  IdeaCategory category = IdeaCategory::kMemoryAccess;
  std::string text;        // the idea itself, in natural language
  std::string generator;   // "llm:MODEL", "catalog"
  // Filled after its branches are judged: e.g. "best branch 1.31x faster than
  // parent" or "3 of 4 branches wrong_result: shifted inputs, L2 error 2e-3".
  std::string outcome;
  double best_speedup_over_parent = 0.0;  // 0 when no branch was correct
};

}  // namespace ksearch

#endif  // KSEARCH_IDEA_H_
