// HttpLlmClient: Beast over plain TCP or OpenSSL, on one I/O thread.
//
// Every piece of mutable state below (the queue, the pending calls, the idle
// connections, the limiter) is touched only on the I/O thread, so none of it
// needs a lock or a strand; the public methods post to that thread. Only the
// totals, the stats and the observer are shared with callers, behind a mutex
// or as atomics.
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "ksearch/http_llm_client.h"
#include "ksearch/price_table.h"
#include "ksearch/version.h"
#include "llm/callbacks.h"
#include "llm/http_util.h"
#include "llm/wire.h"

namespace ksearch {
namespace internal {
namespace {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;
using HttpRequest = http::request<http::string_body>;
using HttpResponse = http::response<http::string_body>;

// Resolved addresses of the base URL's host, shared by the connections.
struct EndpointCache {
  std::vector<tcp::endpoint> endpoints;
  Clock::time_point resolved_at;
  static constexpr auto kTtl = std::chrono::seconds(60);
};

// One HTTP/1.1 connection, plain or TLS, used by one request at a time.
// Lives on the I/O thread.
class Connection {
 public:
  // `stage` names the step that failed ("resolve", "connect", "TLS handshake",
  // "write", "read").
  using Done = std::function<void(beast::error_code, const char* stage)>;

  virtual ~Connection() = default;
  // Sends `request` (which must stay alive until `done`) and reads the reply;
  // connects first when needed.
  virtual void Exchange(const HttpRequest& request, Done done) = 0;
  // Aborts a running exchange (its `done` sees an error) and closes.
  virtual void Close() = 0;
  // An idle connection that the peer has closed (or that holds unexpected
  // bytes) must not be reused.
  virtual bool LooksAlive() = 0;
  // The OpenSSL handle, or nullptr for plain TCP.
  virtual SSL* native_ssl() = 0;

  HttpResponse TakeResponse() { return parser_->release(); }
  // Whether any byte of the reply has arrived (a keep-alive connection that
  // fails before that was most likely closed by the server while idle).
  bool got_reply_bytes() const { return parser_ && parser_->got_some(); }
  bool ReusableAfter(const HttpResponse& response) const {
    return parser_ && parser_->is_done() && response.keep_alive() && buffer_.size() == 0;
  }

  bool reused = false;
  Clock::time_point idle_since;

 protected:
  std::optional<http::response_parser<http::string_body>> parser_;
  beast::flat_buffer buffer_;
};

struct ConnectionConfig {
  const llm::Url* url = nullptr;
  ssl::context* tls = nullptr;
  bool verify_peer = true;
  int64_t max_response_bytes = 0;
  EndpointCache* endpoints = nullptr;
  std::atomic<int64_t>* opened = nullptr;
};

template <bool kTls>
class ConnectionImpl final : public Connection,
                             public std::enable_shared_from_this<ConnectionImpl<kTls>> {
  using Stream = std::conditional_t<kTls, beast::ssl_stream<tcp::socket>, tcp::socket>;

 public:
  ConnectionImpl(net::io_context& io, const ConnectionConfig& config)
      : config_(config), resolver_(io), stream_(MakeStream(io, config)) {}

  void Exchange(const HttpRequest& request, Done done) override {
    request_ = &request;
    done_ = std::move(done);
    if (connected_) {
      Write();
    } else {
      Resolve();
    }
  }

  void Close() override {
    beast::error_code ignored;
    resolver_.cancel();
    socket().close(ignored);
    connected_ = false;
  }

  bool LooksAlive() override {
    if (!connected_ || !socket().is_open() || buffer_.size() != 0) return false;
    char byte;
    ssize_t n = ::recv(socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }

  SSL* native_ssl() override {
    if constexpr (kTls) {
      return stream_.native_handle();
    } else {
      return nullptr;
    }
  }

 private:
  static Stream MakeStream(net::io_context& io, const ConnectionConfig& config) {
    if constexpr (kTls) {
      return Stream(io, *config.tls);
    } else {
      return Stream(io);
    }
  }

  tcp::socket& socket() {
    if constexpr (kTls) {
      return stream_.next_layer();
    } else {
      return stream_;
    }
  }

  void Finish(beast::error_code ec, const char* stage) {
    if (ec) connected_ = false;
    // Moved out first: the handler may start the next exchange on this
    // connection, which sets done_ again.
    Done done = std::move(done_);
    done_ = nullptr;
    done(ec, stage);
  }

  void Resolve() {
    const llm::Url& url = *config_.url;
    beast::error_code not_an_address;
    net::ip::address address = net::ip::make_address(url.host, not_an_address);
    if (!not_an_address) {
      Connect({tcp::endpoint(address, url.port)});
      return;
    }
    EndpointCache& cache = *config_.endpoints;
    if (!cache.endpoints.empty() && Clock::now() - cache.resolved_at < EndpointCache::kTtl) {
      Connect(cache.endpoints);
      return;
    }
    resolver_.async_resolve(
        url.host, std::to_string(url.port),
        [self = this->shared_from_this()](beast::error_code ec,
                                          tcp::resolver::results_type results) {
          if (ec) return self->Finish(ec, "resolve");
          std::vector<tcp::endpoint> endpoints;
          for (const auto& entry : results) endpoints.push_back(entry.endpoint());
          self->config_.endpoints->endpoints = endpoints;
          self->config_.endpoints->resolved_at = Clock::now();
          self->Connect(std::move(endpoints));
        });
  }

  void Connect(std::vector<tcp::endpoint> endpoints) {
    endpoints_ = std::move(endpoints);
    net::async_connect(socket(), endpoints_,
                       [self = this->shared_from_this()](beast::error_code ec, tcp::endpoint) {
                         if (ec) return self->Finish(ec, "connect");
                         // Requests are small and latency-bound: no Nagle.
                         beast::error_code ignored;
                         self->socket().set_option(tcp::no_delay(true), ignored);
                         self->config_.opened->fetch_add(1, std::memory_order_relaxed);
                         self->Handshake();
                       });
  }

  void Handshake() {
    if constexpr (kTls) {
      const std::string& host = config_.url->host;
      SSL* ssl_handle = stream_.native_handle();
      const bool ip = llm::IsIpLiteral(host);
      // SNI is for host names only (RFC 6066 forbids IP literals).
      if (!ip && SSL_set_tlsext_host_name(ssl_handle, host.c_str()) != 1) {
        return Finish(beast::error_code(static_cast<int>(ERR_get_error()),
                                        net::error::get_ssl_category()),
                      "TLS handshake");
      }
      if (config_.verify_peer) {
        X509_VERIFY_PARAM* param = SSL_get0_param(ssl_handle);
        int ok = ip ? X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str())
                    : X509_VERIFY_PARAM_set1_host(param, host.c_str(), host.size());
        if (ok != 1) {
          return Finish(beast::error_code(static_cast<int>(ERR_get_error()),
                                          net::error::get_ssl_category()),
                        "TLS handshake");
        }
      }
      stream_.async_handshake(ssl::stream_base::client,
                              [self = this->shared_from_this()](beast::error_code ec) {
                                if (ec) return self->Finish(ec, "TLS handshake");
                                self->connected_ = true;
                                self->Write();
                              });
    } else {
      connected_ = true;
      Write();
    }
  }

  void Write() {
    parser_.reset();
    http::async_write(stream_, *request_,
                      [self = this->shared_from_this()](beast::error_code ec, size_t) {
                        if (ec) return self->Finish(ec, "write");
                        self->Read();
                      });
  }

  void Read() {
    parser_.emplace();
    parser_->body_limit(static_cast<uint64_t>(config_.max_response_bytes));
    parser_->header_limit(64 * 1024);
    http::async_read(stream_, buffer_, *parser_,
                     [self = this->shared_from_this()](beast::error_code ec, size_t) {
                       self->Finish(ec, "read");
                     });
  }

  const ConnectionConfig config_;
  tcp::resolver resolver_;
  Stream stream_;
  std::vector<tcp::endpoint> endpoints_;
  const HttpRequest* request_ = nullptr;
  Done done_;
  bool connected_ = false;
};

int64_t UnixMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string FormatSeconds(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g s", seconds);
  return text;
}

}  // namespace

class HttpLlmClientImpl : public std::enable_shared_from_this<HttpLlmClientImpl> {
 public:
  using Options = HttpLlmClient::Options;

  static StatusOr<std::shared_ptr<HttpLlmClientImpl>> Create(Options options);

  HttpLlmClientImpl(Options options, llm::Url url, std::string api_key,
                    std::optional<ssl::context> tls)
      : options_(std::move(options)),
        url_(std::move(url)),
        api_key_(std::move(api_key)),
        redact_(api_key_),
        provider_(ToString(options_.provider)),
        tls_(std::move(tls)),
        io_(1),
        work_(net::make_work_guard(io_)),
        limiter_timer_(io_),
        limiter_(options_.rate_limit),
        rng_(options_.retry.seed != 0 ? options_.retry.seed : std::random_device{}()) {
    target_ = url_.path +
              (options_.provider == LlmProvider::kOpenAi ? "/chat/completions" : "/v1/messages");
    user_agent_ = options_.connection.user_agent.empty()
                      ? "ksearch/" + std::string(Version())
                      : options_.connection.user_agent;
    connection_config_ = ConnectionConfig{&url_,
                                          tls_ ? &*tls_ : nullptr,
                                          options_.tls.verify_peer,
                                          options_.connection.max_response_bytes,
                                          &endpoints_,
                                          &connections_opened_};
  }

  void Start() {
    // The thread keeps the implementation alive until the io_context runs
    // dry, even when the public object is destroyed from a callback.
    thread_ = std::thread([self = shared_from_this()] { self->Run(); });
    io_thread_id_ = thread_.get_id();
  }

  // Cancels everything, delivers every callback and stops the I/O thread.
  void Shutdown() {
    if (std::this_thread::get_id() == io_thread_id_) {
      ShutdownOnIoThread();
      thread_.detach();
      return;
    }
    net::post(io_, [this] { ShutdownOnIoThread(); });
    thread_.join();
  }

  uint64_t Complete(ChatRequest request, LlmClient::Callback done) {
    auto call = std::make_shared<Call>(io_);
    call->id = next_id_.fetch_add(1, std::memory_order_relaxed);
    call->started_unix_ms = UnixMillis();
    if (request.model.empty()) request.model = options_.default_model;
    call->request = std::move(request);
    call->done = std::move(done);
    // Serialized on the caller's thread: it is the costliest step of a
    // request and the I/O thread is shared by all of them.
    call->early_error = Validate(call->request);
    if (call->early_error.ok()) BuildHttpRequest(*call);
    net::post(io_, [this, call] { OnSubmit(call); });
    return call->id;
  }

  void Cancel(uint64_t id) {
    net::post(io_, [this, id] {
      auto it = pending_.find(id);
      if (it == pending_.end()) return;
      // A copy: Finish() erases the map entry that `it` points into.
      std::shared_ptr<Call> call = it->second;
      CancelCall(call, "request cancelled");
    });
  }

  LlmTotals totals() const {
    std::lock_guard<std::mutex> lock(shared_mutex_);
    return totals_;
  }

  void SetObserver(LlmClient::ExchangeObserver observer) {
    std::lock_guard<std::mutex> lock(shared_mutex_);
    observer_ = std::move(observer);
  }

  HttpLlmClient::Stats stats() const {
    HttpLlmClient::Stats s;
    s.connections_opened = connections_opened_.load();
    s.connections_reused = connections_reused_.load();
    s.attempts = attempts_.load();
    s.retries = retries_.load();
    s.in_flight = in_flight_.load();
    s.queued = queued_.load();
    s.max_in_flight_seen = max_in_flight_seen_.load();
    s.waiting_to_retry = backing_off_.load();
    s.timeouts = timeouts_.load();
    s.last_retry_delay_seconds = last_retry_delay_.load();
    return s;
  }

  std::string provider() const { return provider_; }
  std::string base_url() const { return url_.ToString(); }

 private:
  enum class Phase { kNew, kQueued, kRunning, kBackoff, kDone };

  struct Call {
    explicit Call(net::io_context& io) : timer(io) {}
    uint64_t id = 0;
    ChatRequest request;
    LlmClient::Callback done;
    Status early_error;
    std::shared_ptr<HttpRequest> http;
    Phase phase = Phase::kNew;
    int attempts = 0;
    // Bumped whenever the timer is re-armed, so that a stale timer handler
    // that was already queued cannot act on a later attempt.
    uint64_t generation = 0;
    bool timed_out = false;
    int timeouts = 0;  // attempts that ended in a time-out
    bool stale_retry_used = false;
    double estimated_tokens = 0;  // prompt bytes / 4 + max_tokens
    double charged_tokens = 0;    // what the limiter holds for the running attempt
    int64_t started_unix_ms = 0;
    Clock::time_point attempt_start;
    net::steady_timer timer;  // attempt deadline, or the wait before a retry
    std::shared_ptr<Connection> connection;
  };

  void Run() {
    for (;;) {
      try {
        io_.run();
        return;
      } catch (const std::exception& e) {
        // Handlers catch what user code throws; anything else is a bug, but
        // the I/O thread must survive it or every pending request hangs.
        Log(std::string("I/O thread caught: ") + e.what());
      }
    }
  }

  void Log(const std::string& line) const {
    if (!options_.log) return;
    std::string text = redact_(provider_ + ": " + line);
    try {
      options_.log(text);
    } catch (...) {
      // A log sink that throws loses its line; the request goes on.
    }
  }

  Status Validate(const ChatRequest& request) const {
    if (request.model.empty()) {
      return InvalidArgumentError(provider_ +
                                  ": no model (set ChatRequest::model or Options::default_model)");
    }
    if (request.messages.empty()) return InvalidArgumentError(provider_ + ": no messages");
    if (request.max_tokens <= 0) {
      return InvalidArgumentError(provider_ + ": max_tokens must be positive, got " +
                                  std::to_string(request.max_tokens));
    }
    if (!(request.timeout_seconds > 0)) {
      return InvalidArgumentError(provider_ + ": timeout_seconds must be positive");
    }
    if (request.thinking_budget_tokens > 0 && options_.provider == LlmProvider::kAnthropic &&
        request.thinking_budget_tokens >= request.max_tokens) {
      return InvalidArgumentError(provider_ + ": thinking_budget_tokens (" +
                                  std::to_string(request.thinking_budget_tokens) +
                                  ") must be less than max_tokens (" +
                                  std::to_string(request.max_tokens) + ")");
    }
    return Status();
  }

  void BuildHttpRequest(Call& call) const {
    auto request = std::make_shared<HttpRequest>(http::verb::post, target_, 11);
    request->set(http::field::host, url_.HostHeader());
    request->set(http::field::user_agent, user_agent_);
    request->set(http::field::content_type, "application/json");
    request->set(http::field::accept, "application/json");
    if (options_.provider == LlmProvider::kOpenAi) {
      if (!api_key_.empty()) request->set(http::field::authorization, "Bearer " + api_key_);
      request->body() = llm::SerializeOpenAiRequest(call.request, call.request.model,
                                                    options_.openai_max_tokens_field);
    } else {
      if (!api_key_.empty()) request->set("x-api-key", api_key_);
      request->set("anthropic-version", options_.anthropic_version);
      request->body() = llm::SerializeAnthropicRequest(call.request, call.request.model);
    }
    request->keep_alive(true);
    request->prepare_payload();
    call.http = std::move(request);
  }

  void OnSubmit(const std::shared_ptr<Call>& call) {
    if (shutting_down_) {
      Finish(call, CancelledError(provider_ + ": client destroyed"));
      return;
    }
    pending_.emplace(call->id, call);
    if (!call->early_error.ok()) {
      Finish(call, call->early_error);
      return;
    }
    call->phase = Phase::kQueued;
    waiting_.push_back(call);
    Pump();
  }

  // Starts queued calls while slots and rate allow.
  void Pump() {
    while (!waiting_.empty() && !shutting_down_ && in_flight_ < options_.max_in_flight) {
      std::shared_ptr<Call> call = waiting_.front();
      if (call->phase != Phase::kQueued) {  // cancelled while waiting
        waiting_.pop_front();
        continue;
      }
      if (limiter_.enabled()) {
        call->estimated_tokens = static_cast<double>(call->http->body().size()) / 4.0 +
                                 static_cast<double>(call->request.max_tokens);
        double wait = limiter_.TryAcquire(call->estimated_tokens, Clock::now());
        if (wait > 0) {
          ArmLimiterTimer(wait);
          break;
        }
        call->charged_tokens = call->estimated_tokens;
      }
      waiting_.pop_front();
      StartAttempt(call, /*fresh_connection=*/false);
    }
    queued_.store(static_cast<int>(pending_.size()) - in_flight_.load());
  }

  void ArmLimiterTimer(double seconds) {
    if (limiter_timer_armed_) return;
    limiter_timer_armed_ = true;
    limiter_timer_.expires_after(std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(seconds)));
    limiter_timer_.async_wait([this](beast::error_code) {
      limiter_timer_armed_ = false;
      Pump();
    });
  }

  std::shared_ptr<Connection> Checkout(bool fresh) {
    const auto now = Clock::now();
    const auto max_idle = std::chrono::duration<double>(options_.connection.idle_timeout_seconds);
    while (!fresh && !idle_.empty()) {
      std::shared_ptr<Connection> connection = std::move(idle_.back());
      idle_.pop_back();
      if (now - connection->idle_since < max_idle && connection->LooksAlive()) {
        connection->reused = true;
        connections_reused_.fetch_add(1, std::memory_order_relaxed);
        return connection;
      }
      connection->Close();
    }
    if (url_.tls) return std::make_shared<ConnectionImpl<true>>(io_, connection_config_);
    return std::make_shared<ConnectionImpl<false>>(io_, connection_config_);
  }

  void Release(std::shared_ptr<Connection> connection) {
    if (shutting_down_ || static_cast<int>(idle_.size()) >= options_.connection.max_idle) {
      connection->Close();
      return;
    }
    connection->idle_since = Clock::now();
    idle_.push_back(std::move(connection));
  }

  void StartAttempt(const std::shared_ptr<Call>& call, bool fresh_connection) {
    int now_in_flight = ++in_flight_;
    if (now_in_flight > max_in_flight_seen_.load()) max_in_flight_seen_.store(now_in_flight);
    attempts_.fetch_add(1, std::memory_order_relaxed);
    if (call->attempts > 0 && !fresh_connection) retries_.fetch_add(1, std::memory_order_relaxed);
    if (!fresh_connection) ++call->attempts;
    call->phase = Phase::kRunning;
    call->timed_out = false;
    call->attempt_start = Clock::now();
    call->connection = Checkout(fresh_connection);

    const uint64_t generation = ++call->generation;
    call->timer.expires_after(std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(call->request.timeout_seconds)));
    call->timer.async_wait([this, call, generation](beast::error_code ec) {
      if (ec || call->generation != generation || call->phase != Phase::kRunning) return;
      call->timed_out = true;
      call->connection->Close();
    });
    call->connection->Exchange(*call->http,
                               [this, call](beast::error_code ec, const char* stage) {
                                 OnExchangeDone(call, ec, stage);
                               });
  }

  void OnExchangeDone(const std::shared_ptr<Call>& call, beast::error_code ec,
                      const char* stage) {
    --in_flight_;
    ++call->generation;
    call->timer.cancel();
    std::shared_ptr<Connection> connection = std::move(call->connection);
    if (call->phase == Phase::kDone) {  // cancelled during the attempt
      connection->Close();
      Pump();
      return;
    }
    if (ec) {
      OnTransportError(call, *connection, ec, stage);
      connection->Close();
      Pump();
      return;
    }
    HttpResponse response = connection->TakeResponse();
    if (connection->ReusableAfter(response)) {
      Release(std::move(connection));
    } else {
      connection->Close();
    }
    const double latency_ms =
        std::chrono::duration<double, std::milli>(Clock::now() - call->attempt_start).count();
    const int status = response.result_int();
    if (status >= 200 && status < 300) {
      OnReply(call, response.body(), latency_ms);
    } else {
      OnHttpError(call, response, status);
    }
    Pump();
  }

  void OnTransportError(const std::shared_ptr<Call>& call, Connection& connection,
                        beast::error_code ec, std::string_view stage) {
    RefundTokens(*call, 0.0);
    if (call->timed_out) {
      // A server that did not answer in time is seldom faster the next time:
      // time-outs get at most Retry::max_timeout_attempts attempts.
      timeouts_.fetch_add(1);
      if (++call->timeouts >= options_.retry.max_timeout_attempts) {
        Fail(call, StatusCode::kDeadlineExceeded,
             "no reply within " + FormatSeconds(call->request.timeout_seconds) + " (stopped at " +
                 std::string(stage) + ")");
        return;
      }
      RetryOrFail(call, StatusCode::kDeadlineExceeded,
                  "no reply within " + FormatSeconds(call->request.timeout_seconds) +
                      " (stopped at " + std::string(stage) + ")",
                  std::nullopt);
      return;
    }
    // A kept-alive connection that the server closed while it sat idle fails
    // on its first use without a byte of reply; that is not the request's
    // fault, so it gets one free attempt on a new connection.
    if (connection.reused && !call->stale_retry_used && !connection.got_reply_bytes() &&
        (stage == "write" || stage == "read")) {
      call->stale_retry_used = true;
      Log("request " + std::to_string(call->id) + ": kept-alive connection failed at " +
          std::string(stage) + " (" + ec.message() + "); reconnecting");
      if (limiter_.enabled()) {
        limiter_.AdjustTokens(-call->estimated_tokens, Clock::now());
        call->charged_tokens = call->estimated_tokens;
      }
      StartAttempt(call, /*fresh_connection=*/true);
      return;
    }
    if (ec == http::error::body_limit) {
      Fail(call, StatusCode::kDataLoss,
           "reply body exceeds max_response_bytes (" +
               std::to_string(options_.connection.max_response_bytes) + ")");
      return;
    }
    if (stage == "TLS handshake" && ec.category() == net::error::get_ssl_category()) {
      // A certificate or protocol mismatch: retrying cannot fix it.
      std::string detail = "TLS handshake with " + url_.host + ": " + ec.message();
      SSL* ssl_handle = connection.native_ssl();
      if (ssl_handle != nullptr) {
        long verify = SSL_get_verify_result(ssl_handle);
        if (verify != X509_V_OK) {
          detail += " (certificate: " + std::string(X509_verify_cert_error_string(verify)) +
                    "; for a private CA set Options::tls.ca_file)";
        }
      }
      Fail(call, StatusCode::kFailedPrecondition, detail);
      return;
    }
    std::string what = ec.message();
    if (ec == http::error::partial_message) {
      what = "connection closed in the middle of the reply";
    } else if (ec == http::error::end_of_stream || ec == net::error::eof) {
      what = "connection closed before the reply";
    }
    RetryOrFail(call, StatusCode::kUnavailable,
                std::string(stage) + " " + url_.HostHeader() + ": " + what, std::nullopt);
  }

  void OnReply(const std::shared_ptr<Call>& call, const std::string& body, double latency_ms) {
    llm::ReplyParse parsed = options_.provider == LlmProvider::kOpenAi
                                 ? llm::ParseOpenAiReply(body, options_.accept_truncated_replies)
                                 : llm::ParseAnthropicReply(body, options_.accept_truncated_replies);
    ChatResponse& response = parsed.response;
    if (response.model.empty()) response.model = call->request.model;
    const PriceTable& prices = options_.prices;
    response.cost_usd = prices.Find(call->request.model) != nullptr
                            ? prices.CostUsd(call->request.model, response.input_tokens,
                                             response.output_tokens)
                            : prices.CostUsd(response.model, response.input_tokens,
                                             response.output_tokens);
    RefundTokens(*call, parsed.usage_found
                            ? static_cast<double>(response.input_tokens + response.output_tokens)
                            : call->charged_tokens);
    if (parsed.usage_found) {
      std::lock_guard<std::mutex> lock(shared_mutex_);
      totals_.input_tokens += response.input_tokens;
      totals_.output_tokens += response.output_tokens;
      totals_.cost_usd += response.cost_usd;
    }
    if (!parsed.status.ok()) {
      if (parsed.retryable) {
        RetryOrFail(call, parsed.status.code(), parsed.status.message(), std::nullopt);
      } else {
        Fail(call, parsed.status.code(), parsed.status.message());
      }
      return;
    }
    response.latency_ms = latency_ms;
    response.attempts = call->attempts;
    Finish(call, std::move(response));
  }

  void OnHttpError(const std::shared_ptr<Call>& call, const HttpResponse& response, int status) {
    RefundTokens(*call, 0.0);
    std::string detail = "HTTP " + std::to_string(status);
    std::string_view reason = response.reason();
    if (!reason.empty()) detail += " (" + std::string(reason) + ")";
    detail += ": " + llm::ExtractErrorMessage(response.body());
    for (const char* header : {"x-request-id", "request-id"}) {
      auto it = response.find(header);
      if (it != response.end()) {
        detail += " [request id " + std::string(it->value()) + "]";
        break;
      }
    }
    const llm::HttpErrorClass kind = llm::ClassifyHttpError(status, response.body());
    const StatusCode code = kind.code;
    detail = kind.prefix + detail;
    if (!kind.retryable) {
      Fail(call, code, detail);
      return;
    }
    std::optional<double> retry_after;
    auto ms = response.find("retry-after-ms");
    if (ms != response.end()) {
      std::optional<double> value = llm::ParseRetryAfterSeconds(ms->value(), {});
      if (value) retry_after = *value / 1000.0;
    }
    auto seconds = response.find(http::field::retry_after);
    if (!retry_after && seconds != response.end()) {
      retry_after = llm::ParseRetryAfterSeconds(seconds->value(), std::chrono::system_clock::now());
    }
    RetryOrFail(call, code, detail, retry_after);
  }

  // Settles the limiter's charge for the attempt that just ended, given the
  // tokens it really used.
  void RefundTokens(Call& call, double used) {
    if (limiter_.enabled() && call.charged_tokens > 0) {
      limiter_.AdjustTokens(call.charged_tokens - used, Clock::now());
    }
    call.charged_tokens = 0;
  }

  // A retryable failure: wait and requeue, or give up when the budget is
  // spent (or the server asks for a longer wait than we accept).
  void RetryOrFail(const std::shared_ptr<Call>& call, StatusCode code, const std::string& detail,
                   std::optional<double> retry_after) {
    const Options::Retry& retry = options_.retry;
    if (call->attempts >= retry.max_attempts || shutting_down_) {
      Fail(call, code, detail);
      return;
    }
    double delay = llm::BackoffSeconds(retry, call->attempts,
                                       std::uniform_real_distribution<double>(0, 1)(rng_));
    if (retry_after) {
      if (*retry_after > retry.max_retry_after_seconds) {
        Fail(call, code,
             detail + "; the server asked to retry after " + FormatSeconds(*retry_after) +
                 ", more than max_retry_after_seconds (" +
                 FormatSeconds(retry.max_retry_after_seconds) + ")");
        return;
      }
      delay = std::max(delay, *retry_after);
    }
    Log("request " + std::to_string(call->id) + " attempt " + std::to_string(call->attempts) +
        "/" + std::to_string(retry.max_attempts) + " failed: " + detail + "; retrying in " +
        FormatSeconds(delay));
    call->phase = Phase::kBackoff;
    backing_off_.fetch_add(1);
    last_retry_delay_.store(delay);
    const uint64_t generation = ++call->generation;
    call->timer.expires_after(
        std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(delay)));
    call->timer.async_wait([this, call, generation](beast::error_code ec) {
      if (ec || call->generation != generation || call->phase != Phase::kBackoff) return;
      backing_off_.fetch_sub(1);
      call->phase = Phase::kQueued;
      // Ahead of new requests: a retry has waited already.
      waiting_.push_front(call);
      Pump();
    });
    queued_.store(static_cast<int>(pending_.size()) - in_flight_.load());
  }

  void Fail(const std::shared_ptr<Call>& call, StatusCode code, const std::string& detail) {
    std::string message = provider_ + ": " + detail;
    if (call->attempts > 1) message += " (after " + std::to_string(call->attempts) + " attempts)";
    Log("request " + std::to_string(call->id) + " failed: " + message);
    Finish(call, Status(code, std::move(message)));
  }

  void CancelCall(const std::shared_ptr<Call>& call, const std::string& why) {
    if (call->phase == Phase::kDone) return;
    if (call->phase == Phase::kRunning && call->connection) call->connection->Close();
    Finish(call, CancelledError(provider_ + ": " + why));
  }

  // Takes `call` by value: callers may hold their reference in pending_,
  // which this erases.
  void Finish(std::shared_ptr<Call> call, StatusOr<ChatResponse> result) {
    if (call->phase == Phase::kDone) return;
    if (call->phase == Phase::kBackoff) backing_off_.fetch_sub(1);
    call->phase = Phase::kDone;
    ++call->generation;
    call->timer.cancel();
    pending_.erase(call->id);
    queued_.store(static_cast<int>(pending_.size()) - in_flight_.load());
    if (!result.ok()) {
      // Servers echo keys in their messages ("Incorrect API key provided:
      // sk-…"); nothing that leaves the client may carry one.
      Status status = result.status();
      result = Status(status.code(), redact_(status.message()));
    }
    LlmClient::ExchangeObserver observer;
    {
      std::lock_guard<std::mutex> lock(shared_mutex_);
      ++totals_.requests;
      if (!result.ok()) ++totals_.failures;
      observer = observer_;
    }
    if (observer) {
      LlmExchange exchange{provider_, RequestHash(call->request), std::move(call->request),
                           result, call->started_unix_ms, call->id};
      llm::Deliver(options_.log, "exchange observer", [&] { observer(exchange); });
    }
    LlmClient::Callback done = std::move(call->done);
    call->done = nullptr;
    llm::Deliver(options_.log, "completion callback", [&] { done(std::move(result)); });
  }

  void ShutdownOnIoThread() {
    shutting_down_ = true;
    std::vector<std::shared_ptr<Call>> calls;
    calls.reserve(pending_.size());
    for (auto& [id, call] : pending_) calls.push_back(call);
    for (auto& call : calls) CancelCall(call, "client destroyed");
    for (auto& connection : idle_) connection->Close();
    idle_.clear();
    waiting_.clear();
    limiter_timer_.cancel();
    work_.reset();
  }

  const Options options_;
  const llm::Url url_;
  const std::string api_key_;
  const llm::Redactor redact_;
  const std::string provider_;
  std::string target_;
  std::string user_agent_;
  // Declared before the io_context: TLS streams must die before their context.
  std::optional<ssl::context> tls_;
  net::io_context io_;
  net::executor_work_guard<net::io_context::executor_type> work_;
  net::steady_timer limiter_timer_;
  bool limiter_timer_armed_ = false;
  llm::RateLimiter limiter_;
  std::mt19937_64 rng_;
  EndpointCache endpoints_;
  ConnectionConfig connection_config_;

  // I/O thread only.
  std::unordered_map<uint64_t, std::shared_ptr<Call>> pending_;
  std::deque<std::shared_ptr<Call>> waiting_;
  std::vector<std::shared_ptr<Connection>> idle_;
  bool shutting_down_ = false;

  // Shared with callers.
  std::atomic<uint64_t> next_id_{1};
  mutable std::mutex shared_mutex_;
  LlmTotals totals_;
  LlmClient::ExchangeObserver observer_;
  std::atomic<int64_t> connections_opened_{0};
  std::atomic<int64_t> connections_reused_{0};
  std::atomic<int64_t> attempts_{0};
  std::atomic<int64_t> retries_{0};
  std::atomic<int> in_flight_{0};
  std::atomic<int> queued_{0};
  std::atomic<int> backing_off_{0};      // calls waiting out a retry delay
  std::atomic<int64_t> timeouts_{0};     // attempts that timed out
  std::atomic<double> last_retry_delay_{0.0};
  std::atomic<int> max_in_flight_seen_{0};

  std::thread thread_;
  std::thread::id io_thread_id_;
};

namespace {

Status CheckOptions(const HttpLlmClient::Options& options) {
  auto bad = [](const std::string& what) {
    return InvalidArgumentError("HttpLlmClient::Options: " + what);
  };
  if (options.max_in_flight < 1) return bad("max_in_flight must be at least 1");
  if (options.retry.max_attempts < 1) return bad("retry.max_attempts must be at least 1");
  if (options.retry.max_timeout_attempts < 1) {
    return bad("retry.max_timeout_attempts must be at least 1");
  }
  if (options.retry.initial_backoff_seconds < 0 || options.retry.max_backoff_seconds < 0 ||
      options.retry.backoff_multiplier < 1) {
    return bad("retry: backoff seconds must be >= 0 and backoff_multiplier >= 1");
  }
  if (options.connection.max_response_bytes <= 0) {
    return bad("connection.max_response_bytes must be positive");
  }
  if (options.rate_limit.requests_per_minute < 0 || options.rate_limit.tokens_per_minute < 0) {
    return bad("rate limits must be >= 0");
  }
  return Status();
}

StatusOr<std::optional<ssl::context>> MakeTlsContext(const HttpLlmClient::Options::Tls& tls) {
  std::optional<ssl::context> context;
  try {
    context.emplace(ssl::context::tls_client);
  } catch (const std::exception& e) {
    return InternalError(std::string("SSL_CTX_new: ") + e.what());
  }
  context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                       ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                       ssl::context::no_tlsv1_1);
  beast::error_code ec;
  if (!tls.verify_peer) {
    context->set_verify_mode(ssl::verify_none, ec);
    return context;
  }
  context->set_verify_mode(ssl::verify_peer, ec);
  if (tls.use_system_store) {
    context->set_default_verify_paths(ec);
    if (ec) return InternalError("SSL_CTX_set_default_verify_paths: " + ec.message());
  }
  if (!tls.ca_file.empty()) {
    context->load_verify_file(tls.ca_file, ec);
    if (ec) {
      return NotFoundError("CA file \"" + tls.ca_file + "\": " + ec.message());
    }
  }
  if (!tls.ca_pem.empty()) {
    context->add_certificate_authority(net::buffer(tls.ca_pem), ec);
    if (ec) return InvalidArgumentError("Options::tls.ca_pem: " + ec.message());
  }
  return context;
}

}  // namespace

StatusOr<std::shared_ptr<HttpLlmClientImpl>> HttpLlmClientImpl::Create(Options options) {
  KSEARCH_RETURN_IF_ERROR(CheckOptions(options));
  KSEARCH_ASSIGN_OR_RETURN(llm::Url url, llm::ParseUrl(llm::ResolveBaseUrl(options)));
  KSEARCH_ASSIGN_OR_RETURN(std::string key, llm::ResolveApiKey(options));
  if (key.empty() && llm::IsHostedApi(url)) {
    const bool anthropic = options.provider == LlmProvider::kAnthropic;
    return FailedPreconditionError(
        std::string(ToString(options.provider)) + ": no API key for " + url.host + " (set " +
        (anthropic ? "ANTHROPIC_API_KEY" : "OPENAI_API_KEY") +
        ", Options::api_key or Options::api_key_file)");
  }
  std::optional<ssl::context> tls;
  if (url.tls) {
    KSEARCH_ASSIGN_OR_RETURN(tls, MakeTlsContext(options.tls));
  }
  auto impl = std::make_shared<HttpLlmClientImpl>(std::move(options), std::move(url),
                                                  std::move(key), std::move(tls));
  impl->Start();
  return impl;
}

}  // namespace internal

StatusOr<std::unique_ptr<HttpLlmClient>> HttpLlmClient::Create(Options options) {
  try {
    KSEARCH_ASSIGN_OR_RETURN(std::shared_ptr<internal::HttpLlmClientImpl> impl,
                             internal::HttpLlmClientImpl::Create(std::move(options)));
    return std::unique_ptr<HttpLlmClient>(new HttpLlmClient(std::move(impl)));
  } catch (const std::exception& e) {
    // Thread creation or an allocation failed: nothing partial escapes.
    return InternalError(std::string("HttpLlmClient::Create: ") + e.what());
  }
}

HttpLlmClient::HttpLlmClient(std::shared_ptr<internal::HttpLlmClientImpl> impl)
    : impl_(std::move(impl)) {}

HttpLlmClient::~HttpLlmClient() { impl_->Shutdown(); }

uint64_t HttpLlmClient::Complete(ChatRequest request, Callback done) {
  return impl_->Complete(std::move(request), std::move(done));
}
void HttpLlmClient::Cancel(uint64_t request_id) { impl_->Cancel(request_id); }
LlmTotals HttpLlmClient::totals() const { return impl_->totals(); }
void HttpLlmClient::SetObserver(ExchangeObserver observer) {
  impl_->SetObserver(std::move(observer));
}
std::string HttpLlmClient::provider() const { return impl_->provider(); }
HttpLlmClient::Stats HttpLlmClient::stats() const { return impl_->stats(); }
std::string HttpLlmClient::base_url() const { return impl_->base_url(); }

}  // namespace ksearch
