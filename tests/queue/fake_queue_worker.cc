// A queue worker with a fake evaluator, for the CPU tests and the benchmark:
// RunQueueWorker as `ksearch worker --queue` runs it, with verdicts scripted
// by "fake:" directives in each candidate's source, e.g.
//   // fake: sleep_ms=50 status=wrong_result
// Directives: sleep_ms=N, status=NAME, die (SIGKILL itself, every time),
// die_once=PATH (SIGKILL itself unless PATH exists; creates it),
// hold_until=PATH (wait until PATH exists).
//
// usage: ksearch_queue_fake_worker --url URL --arch sm_90 [--name N]
//        [--device-name TEXT] [--device-model TEXT] [--prefix P]
//        [--visibility S] [--max-attempts N] [--batch N] [--no-heartbeat]
// Ends on SIGTERM/SIGINT (exit 0) or on an error (exit 1, message on stderr).
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <thread>

#include "ksearch/queue.h"
#include "queue/queue_testing.h"

namespace {

std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop = true; }

class FakeEvaluator final : public ksearch::Evaluator {
 public:
  FakeEvaluator(ksearch::Problem problem, ksearch::DeviceInfo device)
      : problem_(std::move(problem)), device_(std::move(device)) {}

  std::vector<ksearch::Evaluation> Evaluate(std::span<const ksearch::Candidate> candidates,
                                            const std::atomic<bool>* cancel) override {
    std::vector<ksearch::Evaluation> out;
    for (const ksearch::Candidate& c : candidates) {
      ksearch::Evaluation e;
      e.candidate_id = c.id;
      e.content_hash = c.ContentHash();
      e.device = device_;
      if (cancel && cancel->load()) {
        e.status = ksearch::EvalStatus::kCancelled;
        out.push_back(e);
        continue;
      }
      e.status = ksearch::EvalStatus::kOk;
      e.message = "fake queue worker: ok";
      e.timing = ksearch::TimingStats{0.02, 0.02, 0.02, 0.02, 0.02, 0.02, 10};
      std::istringstream words(Directives(c.source));
      std::string word;
      while (words >> word) {
        std::string key = word.substr(0, word.find('='));
        std::string value =
            word.find('=') == std::string::npos ? "" : word.substr(word.find('=') + 1);
        if (key == "sleep_ms") {
          std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(value.c_str())));
        } else if (key == "status") {
          ksearch::ParseEvalStatus(value, &e.status);
          e.message = "fake queue worker: scripted " + value;
        } else if (key == "die") {
          ::raise(SIGKILL);
        } else if (key == "die_once") {
          int marker = ::open(value.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0600);
          if (marker >= 0) {
            ::close(marker);
            ::raise(SIGKILL);
          }
        } else if (key == "hold_until") {
          // A stop ends the hold: when a test fails before it creates the
          // gate, its teardown stops the worker and waits for it, which
          // would otherwise be forever.
          while (::access(value.c_str(), F_OK) != 0 && !(cancel && cancel->load()))
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
          if (::access(value.c_str(), F_OK) != 0) {
            e.status = ksearch::EvalStatus::kCancelled;  // stopped while held: left pending
            break;
          }
        }
      }
      out.push_back(e);
    }
    return out;
  }
  const ksearch::Problem& problem() const override { return problem_; }
  const ksearch::DeviceInfo& device() const override { return device_; }
  std::optional<ksearch::TimingStats> reference_timing() const override { return std::nullopt; }
  std::optional<ksearch::TimingStats> baseline_timing() const override { return std::nullopt; }

 private:
  static std::string Directives(const std::string& source) {
    std::string out;
    for (size_t at = source.find("fake:"); at != std::string::npos;
         at = source.find("fake:", at + 5)) {
      size_t end = source.find('\n', at);
      out +=
          " " + source.substr(at + 5, end == std::string::npos ? std::string::npos : end - at - 5);
    }
    return out;
  }
  ksearch::Problem problem_;
  ksearch::DeviceInfo device_;
};

}  // namespace

int main(int argc, char** argv) {
  ksearch::QueueWorkerOptions options;
  ksearch::internal::QueueWorkerTestHooks hooks;
  ksearch::DeviceInfo device;
  device.name = "fake GPU";
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "fake_queue_worker: " << arg << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--url")
      options.queue.url = next();
    else if (arg == "--arch")
      options.arch = next();
    else if (arg == "--name")
      options.name = next();
    else if (arg == "--device-name")
      device.name = next();
    else if (arg == "--device-model")
      options.device_model = next();
    else if (arg == "--prefix")
      options.queue.prefix = next();
    else if (arg == "--visibility")
      options.queue.visibility_timeout_seconds = std::atof(next().c_str());
    else if (arg == "--max-attempts")
      options.queue.max_attempts = std::atoi(next().c_str());
    else if (arg == "--batch")
      options.batch = std::atoi(next().c_str());
    else if (arg == "--poll")
      options.poll_seconds = std::atof(next().c_str());
    else if (arg == "--no-heartbeat")
      hooks.heartbeat = false;
    else {
      std::cerr << "fake_queue_worker: unknown argument " << arg << "\n";
      return 2;
    }
  }
  if (options.arch.size() > 3) {
    int cc = std::atoi(options.arch.c_str() + 3);
    device.cc_major = cc / 10;
    device.cc_minor = cc % 10;
  }
  options.evaluator_factory = [device](const ksearch::Problem& problem)
      -> ksearch::StatusOr<std::unique_ptr<ksearch::Evaluator>> {
    return std::unique_ptr<ksearch::Evaluator>(new FakeEvaluator(problem, device));
  };
  struct sigaction action = {};
  action.sa_handler = OnSignal;
  ::sigaction(SIGTERM, &action, nullptr);
  ::sigaction(SIGINT, &action, nullptr);
  auto stats = ksearch::internal::RunQueueWorker(options, hooks, &g_stop);
  if (!stats.ok()) {
    std::cerr << "fake_queue_worker " << options.name << ": " << stats.status().ToString() << "\n";
    return 1;
  }
  return 0;
}
