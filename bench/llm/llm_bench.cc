// ksearch_bench_llm: how fast HttpLlmClient drives a server that answers at
// once (MockLlmServer, zero think time, loopback), and how many requests it
// keeps in flight without an error. Reports figures; asserts nothing.
//
//   ksearch_bench_llm [--requests N] [--in-flight 1,64,256,1024] [--tls]
//                     [--provider openai|anthropic] [--mock-threads N]
//                     [--reply-bytes N]
//
// Per row: a closed loop keeps exactly K requests outstanding (each callback
// issues the next one), after a warm-up that opens the connections. Figures:
//   req/s       completed requests per second of wall time
//   p50/p99     Complete() → callback latency, in ms (client + mock + loopback)
//   client µs   CPU time of the client's I/O thread per request (serialize,
//               write, read, parse, callback): the client's own overhead
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "ksearch/http_llm_client.h"
#include "ksearch/mock_llm_server.h"
#include "ksearch/tls_credentials.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  int requests = 20000;
  std::vector<int> in_flight = {1, 64, 256, 1024, 2048};
  bool tls = false;
  ksearch::LlmProvider provider = ksearch::LlmProvider::kOpenAi;
  int mock_threads = 1;
  size_t reply_bytes = 200;
};

bool ParseArgs(int argc, char** argv, Args* args) {
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (flag == "--tls") {
      args->tls = true;
    } else if (flag == "--requests") {
      const char* v = value();
      if (v == nullptr) return false;
      args->requests = std::atoi(v);
    } else if (flag == "--in-flight") {
      const char* v = value();
      if (v == nullptr) return false;
      args->in_flight.clear();
      std::stringstream list(v);
      std::string item;
      while (std::getline(list, item, ',')) args->in_flight.push_back(std::atoi(item.c_str()));
    } else if (flag == "--provider") {
      const char* v = value();
      if (v == nullptr) return false;
      ksearch::StatusOr<ksearch::LlmProvider> provider = ksearch::ParseLlmProvider(v);
      if (!provider.ok()) {
        std::fprintf(stderr, "%s\n", provider.status().ToString().c_str());
        return false;
      }
      args->provider = *provider;
    } else if (flag == "--mock-threads") {
      const char* v = value();
      if (v == nullptr) return false;
      args->mock_threads = std::atoi(v);
    } else if (flag == "--reply-bytes") {
      const char* v = value();
      if (v == nullptr) return false;
      args->reply_bytes = static_cast<size_t>(std::atol(v));
    } else {
      return false;
    }
  }
  return args->requests > 0 && !args->in_flight.empty();
}

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// A closed loop of `in_flight` outstanding requests until `total` complete.
class Loop {
 public:
  Loop(ksearch::LlmClient& client, int total, int in_flight)
      : client_(client), total_(total), in_flight_(in_flight),
        latency_ms_(static_cast<size_t>(total)) {}

  void Run() {
    start_ = Clock::now();
    for (int i = 0; i < std::min(in_flight_, total_); ++i) Issue();
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return completed_ == total_; });
    wall_seconds_ = std::chrono::duration<double>(Clock::now() - start_).count();
  }

  int errors() const { return errors_; }
  const std::string& first_error() const { return first_error_; }
  double wall_seconds() const { return wall_seconds_; }
  double io_cpu_seconds() const { return last_cpu_ - first_cpu_; }
  int cpu_samples() const { return completed_ - 1; }
  double Percentile(double p) {
    std::vector<double> sorted = latency_ms_;
    std::sort(sorted.begin(), sorted.end());
    size_t index = std::min(sorted.size() - 1, static_cast<size_t>(p * sorted.size()));
    return sorted[index];
  }

 private:
  static ksearch::ChatRequest Request(int i) {
    ksearch::ChatRequest request;
    request.model = "bench-model";
    request.system = "You write fast CUDA kernels.";
    request.messages = {{ksearch::ChatMessage::Role::kUser,
                         "Propose an optimization for the softmax kernel, idea " +
                             std::to_string(i)}};
    request.max_tokens = 1024;
    request.timeout_seconds = 60;
    return request;
  }

  void Issue() {
    const int index = issued_.fetch_add(1);
    if (index >= total_) return;
    const auto sent = Clock::now();
    client_.Complete(Request(index), [this, index, sent](ksearch::StatusOr<ksearch::ChatResponse> r) {
      // Runs on the client's I/O thread: its CPU clock is the client's cost.
      const double cpu = ThreadCpuSeconds();
      latency_ms_[static_cast<size_t>(index)] =
          std::chrono::duration<double, std::milli>(Clock::now() - sent).count();
      bool finished = false;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (completed_ == 0) first_cpu_ = cpu;
        last_cpu_ = cpu;
        if (!r.ok()) {
          if (errors_++ == 0) first_error_ = r.status().ToString();
        }
        finished = ++completed_ == total_;
      }
      if (finished) {
        done_.notify_all();
      } else {
        Issue();
      }
    });
  }

  ksearch::LlmClient& client_;
  const int total_;
  const int in_flight_;
  std::vector<double> latency_ms_;
  std::atomic<int> issued_{0};
  std::mutex mutex_;
  std::condition_variable done_;
  int completed_ = 0;
  int errors_ = 0;
  std::string first_error_;
  double first_cpu_ = 0;
  double last_cpu_ = 0;
  double wall_seconds_ = 0;
  Clock::time_point start_;
};

void RaiseFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!ParseArgs(argc, argv, &args)) {
    std::fprintf(stderr,
                 "usage: ksearch_bench_llm [--requests N] [--in-flight 1,64,256] [--tls]\n"
                 "                         [--provider openai|anthropic] [--mock-threads N]\n"
                 "                         [--reply-bytes N]\n");
    return 2;
  }
  RaiseFileLimit();

  ksearch::MockLlmServer::Options mock_options;
  mock_options.threads = args.mock_threads;
  mock_options.max_recorded_requests = 0;
  mock_options.default_reply.content = std::string(args.reply_bytes, 'x');
  std::string ca_pem;
  if (args.tls) {
    auto credentials = ksearch::GenerateSelfSignedCertificate({"127.0.0.1"});
    if (!credentials.ok()) {
      std::fprintf(stderr, "%s\n", credentials.status().ToString().c_str());
      return 1;
    }
    mock_options.tls = *credentials;
    ca_pem = credentials->certificate_pem;
  }
  auto mock = ksearch::MockLlmServer::Start(mock_options);
  if (!mock.ok()) {
    std::fprintf(stderr, "%s\n", mock.status().ToString().c_str());
    return 1;
  }

  std::printf("ksearch_bench_llm: %s over %s, mock with %d thread(s), %zu-byte replies, "
              "zero think time\n\n",
              std::string(ksearch::ToString(args.provider)).c_str(), args.tls ? "HTTPS" : "HTTP",
              args.mock_threads, args.reply_bytes);
  std::printf("| in flight | requests | errors | req/s | p50 ms | p99 ms | client CPU µs/req | "
              "connections |\n");
  std::printf("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  std::fflush(stdout);

  int most_without_error = 0;
  for (int in_flight : args.in_flight) {
    ksearch::HttpLlmClient::Options options;
    options.provider = args.provider;
    options.base_url = args.provider == ksearch::LlmProvider::kOpenAi ? (*mock)->openai_base_url()
                                                                      : (*mock)->base_url();
    options.api_key = "sk-bench-not-a-real-key-000000";
    options.max_in_flight = in_flight;
    options.connection.max_idle = in_flight;
    options.retry.max_attempts = 1;  // an error must show, not be retried away
    options.tls.ca_pem = ca_pem;
    auto client = ksearch::HttpLlmClient::Create(options);
    if (!client.ok()) {
      std::fprintf(stderr, "%s\n", client.status().ToString().c_str());
      return 1;
    }
    // Warm-up: opens the connections, faults in the code paths.
    Loop warm(**client, std::max(2 * in_flight, 500), in_flight);
    warm.Run();
    const int total = std::max(args.requests, 10 * in_flight);
    Loop loop(**client, total, in_flight);
    loop.Run();
    const int errors = warm.errors() + loop.errors();
    std::printf("| %d | %d | %d | %.0f | %.3f | %.3f | %.1f | %lld |\n", in_flight, total, errors,
                total / loop.wall_seconds(), loop.Percentile(0.50), loop.Percentile(0.99),
                loop.io_cpu_seconds() / std::max(1, loop.cpu_samples()) * 1e6,
                static_cast<long long>((*client)->stats().connections_opened));
    std::fflush(stdout);
    if (errors > 0) {
      std::printf("\n  first error at %d in flight: %s\n",
                  in_flight, (warm.errors() > 0 ? warm.first_error() : loop.first_error()).c_str());
    } else {
      most_without_error = std::max(most_without_error, in_flight);
    }
  }
  std::printf("\nmost requests in flight without an error: %d\n", most_without_error);
  return 0;
}
