// ksearch: an SDK that searches for fast CUDA kernels. Include this header for
// the whole public API; each concept also has its own header.
#ifndef KSEARCH_KSEARCH_H_
#define KSEARCH_KSEARCH_H_

#include "ksearch/caching_evaluator.h"
#include "ksearch/candidate.h"
#include "ksearch/evaluation.h"
#include "ksearch/evaluator.h"
#include "ksearch/exchange_answer.h"
#include "ksearch/exchange_llm_client.h"
#include "ksearch/generator.h"
#include "ksearch/http_llm_client.h"
#include "ksearch/idea.h"
#include "ksearch/kernel_blocks.h"
#include "ksearch/kernel_cache.h"
#include "ksearch/kernel_runner.h"
#include "ksearch/llm_client.h"
#include "ksearch/llm_recording.h"
#include "ksearch/mock_llm_server.h"
#include "ksearch/price_table.h"
#include "ksearch/problem.h"
#include "ksearch/queue.h"
#include "ksearch/replay_llm_client.h"
#include "ksearch/resuming_llm_client.h"
#include "ksearch/run_recorder.h"
#include "ksearch/run_report.h"
#include "ksearch/run_session.h"
#include "ksearch/searcher.h"
#include "ksearch/status.h"
#include "ksearch/store.h"
#include "ksearch/strategies.h"
#include "ksearch/tensor.h"
#include "ksearch/tls_credentials.h"
#include "ksearch/version.h"
#include "ksearch/worker_pool.h"

#endif  // KSEARCH_KSEARCH_H_
