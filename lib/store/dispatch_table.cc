#include "store/dispatch_table.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "core/shape_cases.h"

namespace ksearch::internal {
namespace {

std::string DimsText(const DispatchTable::Dims& dims) {
  std::string out;
  for (const auto& [name, value] : dims) out += (out.empty() ? "" : " ") + name + "=" + std::to_string(value);
  return out;
}

}  // namespace

StatusOr<DispatchTable> DispatchTable::Create(const Problem& problem, const std::vector<int>& buckets) {
  DispatchTable t;
  t.problem_ = problem;
  t.buckets_ = buckets;
  const DispatchSpec& d = problem.dispatch;
  if (buckets.empty()) return InvalidArgumentError("KernelRunner: no cached kernel given");
  for (size_t i = 0; i < buckets.size(); ++i) {
    const int b = buckets[i];
    const std::string entry = "KernelRunner: entry " + std::to_string(i);
    if (b < -1 || (b >= 0 && static_cast<size_t>(b) >= d.bucket_count()) || (b >= 0 && !d.enabled())) {
      return InvalidArgumentError(entry + " serves bucket " + std::to_string(b) + ", but problem '" +
                                  problem.name + "' has " +
                                  (d.enabled() ? std::to_string(d.bucket_count()) + " buckets"
                                               : std::string("no dispatch buckets")));
    }
    if (b == -1 && buckets.size() > 1) {
      return InvalidArgumentError(entry + " serves the whole problem (bucket -1); a table holds "
                                  "one entry per bucket");
    }
    for (size_t j = 0; j < i; ++j) {
      if (buckets[j] == b) {
        return InvalidArgumentError(entry + ": bucket " + d.BucketName(b) + " is served by entry " +
                                    std::to_string(j) + " already");
      }
    }
    std::vector<Dims> checked;
    const size_t cases = problem.Cases().size();
    for (size_t c = 0; c < cases; ++c) {
      if (b >= 0 && BucketOfCase(problem, c) != static_cast<size_t>(b)) continue;
      checked.push_back(problem.CaseDims(c));
    }
    t.checked_.push_back(std::move(checked));
  }
  return t;
}

StatusOr<size_t> DispatchTable::Select(std::span<const DimValue> dims, bool allow_unchecked) const {
  Dims values = problem_.dims;
  for (const DimValue& d : dims) {
    auto it = std::find_if(values.begin(), values.end(), [&](const auto& v) { return v.first == d.name; });
    if (it == values.end()) {
      return InvalidArgumentError("KernelRunner: '" + std::string(d.name) + "' is not a dim of problem '" +
                                  problem_.name + "'");
    }
    if (d.value < 1) {
      return InvalidArgumentError("KernelRunner: dim " + std::string(d.name) + " = " + std::to_string(d.value) +
                                  " (dims are positive)");
    }
    it->second = d.value;
  }
  const DispatchSpec& spec = problem_.dispatch;
  const std::string unchecked_hint =
      "; set KernelRunner::Options::allow_unchecked_dims to launch at dims the search did not check";
  size_t entry = 0;
  if (buckets_[0] >= 0) {
    int64_t value = 0;
    for (const auto& [name, v] : values) {
      if (name == spec.dim) value = v;
    }
    const size_t want = spec.BucketOf(value);
    size_t best_distance = SIZE_MAX;
    for (size_t i = 0; i < buckets_.size(); ++i) {
      size_t distance = static_cast<size_t>(std::abs(buckets_[i] - static_cast<int>(want)));
      if (distance < best_distance) {
        best_distance = distance;
        entry = i;
      }
    }
    if (best_distance != 0 && !allow_unchecked) {
      std::string have;
      for (int b : buckets_) have += (have.empty() ? "" : ", ") + spec.BucketName(b);
      return FailedPreconditionError("KernelRunner: dim " + spec.dim + " = " + std::to_string(value) +
                                     " is outside every checked bucket: it falls in " + spec.BucketName(want) +
                                     ", and the table holds kernels for " + have + unchecked_hint);
    }
    if (best_distance != 0) return entry;
  }
  if (allow_unchecked) return entry;
  // The dims must be those of a case the entry was checked at; the dispatch
  // dim only has to lie in the entry's bucket (Select chose it by that).
  std::vector<const Dims*> matching;
  for (const Dims& c : checked_[entry]) matching.push_back(&c);
  for (size_t d = 0; d < values.size(); ++d) {
    if (buckets_[entry] >= 0 && values[d].first == spec.dim) continue;
    std::vector<const Dims*> still;
    for (const Dims* c : matching) {
      if ((*c)[d].second == values[d].second) still.push_back(c);
    }
    if (still.empty()) {
      std::string checked;
      for (const Dims& c : checked_[entry]) checked += (checked.empty() ? "" : "; ") + DimsText(c);
      return FailedPreconditionError("KernelRunner: dim " + values[d].first + " = " + std::to_string(values[d].second) +
                                     " was not checked by the search for this kernel (checked at: " + checked +
                                     ")" + unchecked_hint);
    }
    matching = std::move(still);
  }
  return entry;
}

}  // namespace ksearch::internal
