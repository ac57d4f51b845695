// SIGINT and SIGTERM as a graceful stop: while a StopSignals object lives,
// either signal sets one process-wide flag (and remembers which came), which
// a search, an answering loop or a server watches to finish what it is doing.
#ifndef KSEARCH_TOOLS_STOP_SIGNALS_H_
#define KSEARCH_TOOLS_STOP_SIGNALS_H_

#include <atomic>

namespace ksearch::cli {

// The flag both signals set. Others may set it too (a search that stops to
// wait sets it itself).
std::atomic<bool>& StopRequested();
// SIGINT or SIGTERM, whichever set the flag first; 0 when no signal did.
int StopSignal();

// Installs the handlers for the rest of the process: a signal while a run's
// summary is printed or its run recorded must not end the process half-way.
// The first signal writes `acknowledgement` (when given) to stderr at once and
// decides StopSignal(); later ones change nothing.
void InstallStopSignals(const char* acknowledgement);

// Installs the handlers; the destructor puts back the default ones. One at a
// time per process.
class StopSignals {
 public:
  explicit StopSignals(const char* acknowledgement = nullptr);
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
};

}  // namespace ksearch::cli

#endif  // KSEARCH_TOOLS_STOP_SIGNALS_H_
