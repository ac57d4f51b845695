#include "stop_signals.h"

#include <csignal>

namespace ksearch::cli {
namespace {

std::atomic<bool> g_stop{false};
std::atomic<int> g_signal{0};

// Lock-free atomics only: safe in a signal handler.
void OnStopSignal(int signal) {
  int none = 0;
  g_signal.compare_exchange_strong(none, signal);
  g_stop.store(true);
}

}  // namespace

std::atomic<bool>& StopRequested() { return g_stop; }
int StopSignal() { return g_signal.load(); }

StopSignals::StopSignals() {
  std::signal(SIGINT, OnStopSignal);
  std::signal(SIGTERM, OnStopSignal);
}

StopSignals::~StopSignals() {
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
}

}  // namespace ksearch::cli
