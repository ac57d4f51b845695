#include "core/plan_signature.h"

#include <algorithm>

namespace ksearch::internal {

std::string ArgumentMismatch(size_t index, const LaunchSpec& spec, const ResolvedLaunch& launch,
                             std::span<const int64_t> param_sizes) {
  const std::string where = "launches[" + std::to_string(index) + "] (" + launch.kernel + ")";
  if (param_sizes.size() != launch.args.size()) {
    return where + ": the plan passes " + std::to_string(launch.args.size()) +
           " arguments but the kernel takes " + std::to_string(param_sizes.size());
  }
  for (size_t a = 0; a < param_sizes.size(); ++a) {
    if (param_sizes[a] == launch.args[a].Size()) continue;
    std::string text = a < spec.args.size() ? " (\"" + spec.args[a] + "\")" : "";
    return where + ": argument " + std::to_string(a) + text + " is " +
           std::to_string(param_sizes[a]) + " bytes in the kernel but the plan passes " +
           std::to_string(launch.args[a].Size()) +
           " (pointers are 8 bytes; scalars i32/f32 4, i64 8)";
  }
  return "";
}

std::string MissingKernel(size_t launch, const std::string& kernel, const std::string& candidate,
                          const std::vector<KernelResources>& found) {
  std::vector<std::string> sorted;
  for (const KernelResources& r : found) sorted.push_back(r.kernel);
  std::sort(sorted.begin(), sorted.end());
  std::string names;
  for (const std::string& name : sorted) names += (names.empty() ? "" : ", ") + name;
  return "launches[" + std::to_string(launch) + "]: kernel '" + kernel + "' is not an entry point of " +
         (candidate.empty() ? std::string("the source") : "'" + candidate + "'") + " (" +
         (names.empty() ? std::string("it has no extern \"C\" __global__ function")
                        : "its entry points: " + names) +
         "; is the kernel declared extern \"C\" __global__?)";
}

}  // namespace ksearch::internal
