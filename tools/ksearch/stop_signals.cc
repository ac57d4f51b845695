#include "stop_signals.h"

#include <unistd.h>

#include <csignal>
#include <cstring>

namespace ksearch::cli {
namespace {

std::atomic<bool> g_stop{false};
std::atomic<int> g_signal{0};
std::atomic<const char*> g_acknowledgement{nullptr};

// Lock-free atomics and write() only: safe in a signal handler.
void OnStopSignal(int signal) {
  int none = 0;
  if (!g_signal.compare_exchange_strong(none, signal)) return;
  g_stop.store(true);
  if (const char* text = g_acknowledgement.load()) {
    ssize_t ignored = ::write(STDERR_FILENO, text, std::strlen(text));
    (void)ignored;
  }
}

}  // namespace

std::atomic<bool>& StopRequested() { return g_stop; }
int StopSignal() { return g_signal.load(); }

void InstallStopSignals(const char* acknowledgement) {
  g_acknowledgement.store(acknowledgement);
  std::signal(SIGINT, OnStopSignal);
  std::signal(SIGTERM, OnStopSignal);
}

StopSignals::StopSignals(const char* acknowledgement) { InstallStopSignals(acknowledgement); }

StopSignals::~StopSignals() {
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
}

}  // namespace ksearch::cli
