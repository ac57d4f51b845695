// Delivering user callbacks on a client's own thread (the HTTP client's I/O
// thread, the replay and exchange clients' delivery threads): a callback
// that throws is reported and goes no further, so the thread that delivers
// every other callback survives it.
#ifndef KSEARCH_LIB_LLM_CALLBACKS_H_
#define KSEARCH_LIB_LLM_CALLBACKS_H_

#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <string_view>

namespace ksearch::llm {

// Reports an exception thrown by user code: to the log sink when there is
// one (and it does not throw in turn), else to stderr.
inline void ReportThrow(const std::function<void(std::string_view)>& log, const std::string& line) {
  if (log) {
    try {
      log(line);
      return;
    } catch (...) {
    }
  }
  std::fprintf(stderr, "ksearch: %s\n", line.c_str());
}

// Runs `f`, a user callback; `what` names it in the report ("completion
// callback", "exchange observer").
template <typename F>
void Deliver(const std::function<void(std::string_view)>& log, const char* what, F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    ReportThrow(log, std::string("llm: ") + what + " threw: " + e.what());
  } catch (...) {
    ReportThrow(log, std::string("llm: ") + what + " threw a non-standard exception");
  }
}

}  // namespace ksearch::llm

#endif  // KSEARCH_LIB_LLM_CALLBACKS_H_
