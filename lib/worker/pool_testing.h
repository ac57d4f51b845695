// Test hooks of the worker pool, kept out of the public WorkerPoolOptions:
// arguments added to every worker's command line, which is how the tests,
// the benchmarks and `ksearch worker --fake` start fake workers
// (`ksearch-worker --fake …`; `ksearch-worker --help` lists them).
#ifndef KSEARCH_WORKER_POOL_TESTING_H_
#define KSEARCH_WORKER_POOL_TESTING_H_

#include <memory>
#include <string>
#include <vector>

#include "ksearch/worker_pool.h"

namespace ksearch::internal {

// ksearch::CreateWorkerPoolEvaluator, each worker started with
// `worker_arguments` after its own.
StatusOr<std::unique_ptr<WorkerPoolEvaluator>> CreateWorkerPoolEvaluator(
    const Problem& problem, const WorkerPoolOptions& options,
    std::vector<std::string> worker_arguments);

}  // namespace ksearch::internal

#endif  // KSEARCH_WORKER_POOL_TESTING_H_
