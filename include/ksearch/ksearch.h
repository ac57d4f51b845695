// ksearch: an SDK that searches for fast CUDA kernels. Include this header for
// the whole public API; each concept also has its own header.
#ifndef KSEARCH_KSEARCH_H_
#define KSEARCH_KSEARCH_H_

#include "ksearch/candidate.h"
#include "ksearch/evaluation.h"
#include "ksearch/evaluator.h"
#include "ksearch/generator.h"
#include "ksearch/idea.h"
#include "ksearch/kernel_cache.h"
#include "ksearch/kernel_runner.h"
#include "ksearch/llm.h"
#include "ksearch/llm_client.h"
#include "ksearch/problem.h"
#include "ksearch/searcher.h"
#include "ksearch/status.h"
#include "ksearch/store.h"
#include "ksearch/strategies.h"
#include "ksearch/tensor.h"
#include "ksearch/version.h"
#include "ksearch/worker_pool.h"

#endif  // KSEARCH_KSEARCH_H_
