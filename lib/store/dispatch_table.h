// Which cached kernel a launch at some dims runs, and whether the search
// checked a kernel at those dims (KernelRunner's refusals, kernel_runner.h).
//
// A kernel was checked at the problem's shape cases (Problem::Cases): all
// of them for an entry that serves the whole problem (bucket -1), the cases
// of its bucket for a dispatch table's entry. A launch is checked when its
// dims are those of one of the entry's cases, except the dispatch dim, which
// may take any value inside the entry's bucket (a bucket is a range the
// problem declares, checked at the cases it holds).
//
// Thread safety: plain values after Create.
#ifndef KSEARCH_STORE_DISPATCH_TABLE_H_
#define KSEARCH_STORE_DISPATCH_TABLE_H_

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ksearch/kernel_cache.h"
#include "ksearch/kernel_runner.h"
#include "ksearch/problem.h"

namespace ksearch::internal {

class DispatchTable {
 public:
  using Dims = std::vector<std::pair<std::string, int64_t>>;

  // `buckets[i]` is the bucket entry i serves (CachedKernel::key.bucket):
  // either one entry with -1, or distinct buckets of problem.dispatch.
  // Errors: kInvalidArgument naming the entry (a bucket for a problem
  // without dispatch, out of range, given twice, or -1 in a table).
  static StatusOr<DispatchTable> Create(const Problem& problem, const std::vector<int>& buckets);

  // The entry a launch at `dims` (overrides of the problem's dims) runs.
  // Errors: kInvalidArgument for a dim the problem does not have or a value
  // below 1; kFailedPrecondition naming the dim and its value when the dims
  // are outside every checked bucket or were not checked for the entry,
  // unless `allow_unchecked` (then the entry of the dispatch dim's bucket,
  // or of the nearest bucket that has one).
  StatusOr<size_t> Select(std::span<const DimValue> dims, bool allow_unchecked) const;

  // The dims entry `i` was checked at, first case first.
  const std::vector<Dims>& checked(size_t i) const { return checked_[i]; }

 private:
  Problem problem_;
  std::vector<int> buckets_;
  std::vector<std::vector<Dims>> checked_;  // per entry
};

}  // namespace ksearch::internal

#endif  // KSEARCH_STORE_DISPATCH_TABLE_H_
