// Test hooks of the queue worker, kept out of the public QueueWorkerOptions:
// the tests reach them through RunQueueWorker below, an application never
// needs them.
#ifndef KSEARCH_QUEUE_QUEUE_TESTING_H_
#define KSEARCH_QUEUE_QUEUE_TESTING_H_

#include <atomic>

#include "ksearch/queue.h"

namespace ksearch::internal {

struct QueueWorkerTestHooks {
  // Refresh the claim on held jobs while judging them. Off in tests that need
  // a worker to look dead while it is alive.
  bool heartbeat = true;
};

// ksearch::RunQueueWorker with the hooks.
StatusOr<QueueWorkerStats> RunQueueWorker(const QueueWorkerOptions& options,
                                          const QueueWorkerTestHooks& hooks,
                                          const std::atomic<bool>* stop);

}  // namespace ksearch::internal

#endif  // KSEARCH_QUEUE_QUEUE_TESTING_H_
