#include "ksearch/idea.h"

#include <utility>

namespace ksearch {
namespace {
constexpr std::pair<IdeaCategory, std::string_view> kNames[] = {
    {IdeaCategory::kMemoryAccess, "memory_access"}, {IdeaCategory::kAsynchrony, "asynchrony"},
    {IdeaCategory::kDataTypes, "data_types"},       {IdeaCategory::kCompute, "compute"},
    {IdeaCategory::kParallelism, "parallelism"},    {IdeaCategory::kControlFlow, "control_flow"}};
}  // namespace

std::string_view ToString(IdeaCategory category) {
  for (const auto& [c, name] : kNames) {
    if (c == category) return name;
  }
  return "unknown";
}

bool ParseIdeaCategory(std::string_view text, IdeaCategory* out) {
  for (const auto& [c, name] : kNames) {
    if (name == text) {
      *out = c;
      return true;
    }
  }
  return false;
}

}  // namespace ksearch
