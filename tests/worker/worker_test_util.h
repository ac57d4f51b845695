// Shared by the worker pool tests: where the worker binary is.
#ifndef KSEARCH_TESTS_WORKER_WORKER_TEST_UTIL_H_
#define KSEARCH_TESTS_WORKER_WORKER_TEST_UTIL_H_

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace ksearch::testing {

// $KSEARCH_WORKER, else ksearch-worker beside the test (a GPU bundle), else
// the one built with the tests.
inline std::string TestWorkerBinary() {
  if (const char* env = std::getenv("KSEARCH_WORKER"); env && *env) return env;
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    auto beside = self.parent_path() / "ksearch-worker";
    if (::access(beside.c_str(), X_OK) == 0) return beside.string();
  }
#ifdef KSEARCH_TEST_WORKER_BINARY
  return KSEARCH_TEST_WORKER_BINARY;
#else
  return "ksearch-worker";
#endif
}

}  // namespace ksearch::testing

#endif  // KSEARCH_TESTS_WORKER_WORKER_TEST_UTIL_H_
