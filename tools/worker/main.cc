// ksearch-worker: judges candidates on one GPU for a worker pool. Started by
// the library (CreateWorkerPoolEvaluator), never by hand; see --help.
#include "ksearch/worker_pool.h"

int main(int argc, char** argv) { return ksearch::WorkerProcessMain(argc, argv); }
