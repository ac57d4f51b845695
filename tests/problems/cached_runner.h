// The way an engine loads a tuned kernel, for the problems' GPU tests: the
// kernel is stored as the problem's best in a kernel cache and loaded back
// through KernelRunner, which then launches it on the test's own buffers.
#ifndef KSEARCH_TESTS_PROBLEMS_CACHED_RUNNER_H_
#define KSEARCH_TESTS_PROBLEMS_CACHED_RUNNER_H_

#include <memory>
#include <string>

#include "ksearch/kernel_cache.h"
#include "ksearch/kernel_runner.h"
#include "ksearch/problem.h"
#include "ksearch/store.h"

namespace ksearch::testing {

// `database` is the SQLite file of the cache (created when missing).
inline StatusOr<std::unique_ptr<KernelRunner>> LoadAsCached(const Problem& problem,
                                                            const KernelSpec& kernel,
                                                            const std::string& label,
                                                            const DeviceInfo& device,
                                                            const std::string& database) {
  auto store = Store::Open(database);
  if (!store.ok()) return store.status();
  KernelCache cache(**store);
  HistoryEntry entry;
  entry.candidate = kernel.ToCandidate(label, label);
  entry.evaluation.status = EvalStatus::kOk;
  entry.evaluation.timing = TimingStats{};
  entry.evaluation.timing->median_ms = 1.0;
  auto put = cache.PutBest(problem, device, entry);
  if (!put.ok()) return put.status();
  auto cached = cache.Lookup(KernelCacheKey::For(problem, device));
  if (!cached.ok()) return cached.status();
  return KernelRunner::Load(*cached, problem);
}

}  // namespace ksearch::testing

#endif  // KSEARCH_TESTS_PROBLEMS_CACHED_RUNNER_H_
