// MockLlmServer: a Beast HTTP(S) server that answers chat requests from a
// script, with faults on demand. Sessions run on strands, so any number of
// threads may serve; the script, history and random source sit behind one
// mutex (a request holds it for microseconds).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <fstream>
#include <mutex>
#include <optional>
#include <random>
#include <regex>
#include <sstream>
#include <thread>
#include <type_traits>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include "ksearch/mock_llm_server.h"
#include "llm/mock_script.h"
#include "llm/wire.h"

namespace ksearch {
namespace internal {
namespace {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;

// What a session does with one request, decided under the server's lock and
// carried out without it.
struct Plan {
  MockFault fault = MockFault::kNone;
  int http_status = 200;
  std::string body;
  double retry_after_seconds = -1;
  double delay_ms = 0;
};

struct CompiledRule {
  MockRule rule;
  std::optional<std::regex> regex;
};

class SessionBase {
 public:
  virtual ~SessionBase() = default;
  virtual void ForceClose() = 0;
};

}  // namespace

class MockLlmServerImpl {
 public:
  explicit MockLlmServerImpl(MockLlmServer::Options options)
      : options_(std::move(options)),
        io_(std::max(1, options_.threads)),
        acceptor_(io_),
        accept_retry_timer_(io_),
        work_(net::make_work_guard(io_)),
        rng_(options_.seed),
        default_reply_(options_.default_reply) {}

  Status Listen() {
    if (!options_.tls.certificate_pem.empty() || !options_.tls.private_key_pem.empty()) {
      beast::error_code ec;
      try {
        tls_.emplace(ssl::context::tls_server);
      } catch (const std::exception& e) {
        return InternalError(std::string("SSL_CTX_new: ") + e.what());
      }
      tls_->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                        ssl::context::no_sslv3);
      tls_->use_certificate_chain(net::buffer(options_.tls.certificate_pem), ec);
      if (ec) return InvalidArgumentError("mock server: TLS certificate: " + ec.message());
      tls_->use_private_key(net::buffer(options_.tls.private_key_pem), ssl::context::pem, ec);
      if (ec) return InvalidArgumentError("mock server: TLS private key: " + ec.message());
    }
    beast::error_code ec;
    net::ip::address address = net::ip::make_address(options_.address, ec);
    if (ec) {
      return InvalidArgumentError("mock server: bad address \"" + options_.address +
                                  "\": " + ec.message());
    }
    tcp::endpoint endpoint(address, options_.port);
    const std::string where = "mock server: " + options_.address + ":" +
                              std::to_string(options_.port);
    acceptor_.open(endpoint.protocol(), ec);
    if (ec) return UnavailableError(where + ": open: " + ec.message());
    acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    acceptor_.bind(endpoint, ec);
    if (ec) return UnavailableError(where + ": bind: " + ec.message());
    acceptor_.listen(net::socket_base::max_listen_connections, ec);
    if (ec) return UnavailableError(where + ": listen: " + ec.message());
    port_ = acceptor_.local_endpoint().port();
    Accept();
    return Status();
  }

  void StartThreads() {
    for (int i = 0; i < std::max(1, options_.threads); ++i) {
      threads_.emplace_back([this] {
        for (;;) {
          try {
            io_.run();
            return;
          } catch (const std::exception& e) {
            std::fprintf(stderr, "ksearch: mock LLM server thread caught: %s\n", e.what());
          }
        }
      });
    }
  }

  void Stop() {
    if (stopped_.exchange(true)) return;
    work_.reset();
    io_.stop();
    for (std::thread& thread : threads_) thread.join();
    threads_.clear();
    // No thread runs now: closing sockets from here races with nothing.
    beast::error_code ignored;
    acceptor_.close(ignored);
    accept_retry_timer_.cancel();
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& weak : sessions_) {
      if (auto session = weak.lock()) session->ForceClose();
    }
    sessions_.clear();
  }

  uint16_t port() const { return port_; }
  bool tls() const { return tls_.has_value(); }
  ssl::context& tls_context() { return *tls_; }

  void Enqueue(MockReply reply) {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(reply));
  }

  Status AddRule(MockRule rule) {
    CompiledRule compiled;
    if (!rule.regex.empty()) {
      try {
        compiled.regex.emplace(rule.regex, std::regex::ECMAScript);
      } catch (const std::regex_error& e) {
        return InvalidArgumentError("mock rule: bad regex \"" + rule.regex + "\": " + e.what());
      }
    }
    compiled.rule = std::move(rule);
    std::lock_guard<std::mutex> lock(mutex_);
    rules_.push_back(std::move(compiled));
    return Status();
  }

  void SetDefaultReply(MockReply reply) {
    std::lock_guard<std::mutex> lock(mutex_);
    default_reply_ = std::move(reply);
  }

  void ClearScript() {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.clear();
    rules_.clear();
  }

  // With mutex_ held: a reply written with this usage.
  void BillLocked(int64_t input_tokens, int64_t output_tokens) {
    ++billed_replies_;
    billed_input_tokens_ += input_tokens;
    billed_output_tokens_ += output_tokens;
  }

  MockLlmServer::Counters counters() const {
    MockLlmServer::Counters c;
    c.requests = requests_.load();
    c.connections = connections_.load();
    c.faults = faults_.load();
    c.concurrent_requests = concurrent_.load();
    c.max_concurrent_requests = max_concurrent_.load();
    std::lock_guard<std::mutex> lock(mutex_);
    c.billed_replies = billed_replies_;
    c.billed_input_tokens = billed_input_tokens_;
    c.billed_output_tokens = billed_output_tokens_;
    return c;
  }

  std::vector<MockRequest> requests() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return std::vector<MockRequest>(history_.begin(), history_.end());
  }

  void RequestStarted() {
    requests_.fetch_add(1);
    int now = concurrent_.fetch_add(1) + 1;
    int seen = max_concurrent_.load();
    while (now > seen && !max_concurrent_.compare_exchange_weak(seen, now)) {
    }
  }
  void RequestEnded() { concurrent_.fetch_sub(1); }

  Plan Decide(const http::request<http::string_body>& request);

  void Register(const std::shared_ptr<SessionBase>& session) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (sessions_.size() > 256) {
      std::erase_if(sessions_, [](const std::weak_ptr<SessionBase>& w) { return w.expired(); });
    }
    sessions_.push_back(session);
  }

 private:
  void Accept();

  MockReply ChooseReply(const ChatRequest& request, const std::string& text);

  const MockLlmServer::Options options_;
  // Declared before the io_context: TLS streams must die before their context.
  std::optional<ssl::context> tls_;
  net::io_context io_;
  tcp::acceptor acceptor_;
  net::steady_timer accept_retry_timer_;
  net::executor_work_guard<net::io_context::executor_type> work_;
  std::vector<std::thread> threads_;
  uint16_t port_ = 0;
  std::atomic<bool> stopped_{false};

  mutable std::mutex mutex_;
  std::mt19937_64 rng_;
  std::deque<MockReply> queue_;
  std::vector<CompiledRule> rules_;
  MockReply default_reply_;
  std::deque<MockRequest> history_;
  std::vector<std::weak_ptr<SessionBase>> sessions_;
  // Counters::billed_*, under mutex_.
  int64_t billed_replies_ = 0;
  int64_t billed_input_tokens_ = 0;
  int64_t billed_output_tokens_ = 0;

  std::atomic<int64_t> requests_{0};
  std::atomic<int64_t> connections_{0};
  std::atomic<int64_t> faults_{0};
  std::atomic<int> concurrent_{0};
  std::atomic<int> max_concurrent_{0};

  template <bool kTls>
  friend class Session;
};

namespace {

std::string FormatNumber(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

}  // namespace

template <bool kTls>
class Session final : public SessionBase, public std::enable_shared_from_this<Session<kTls>> {
  using Stream = std::conditional_t<kTls, beast::ssl_stream<tcp::socket>, tcp::socket>;

 public:
  Session(tcp::socket socket, MockLlmServerImpl* server)
      : server_(server),
        timer_(socket.get_executor()),
        stream_(MakeStream(std::move(socket), server)) {}

  void Start() {
    if constexpr (kTls) {
      stream_.async_handshake(ssl::stream_base::server,
                              [self = this->shared_from_this()](beast::error_code ec) {
                                if (ec) return self->ForceClose();
                                self->Read();
                              });
    } else {
      Read();
    }
  }

  void ForceClose() override {
    beast::error_code ignored;
    timer_.cancel();
    socket().close(ignored);
  }

 private:
  static Stream MakeStream(tcp::socket socket, MockLlmServerImpl* server) {
    if constexpr (kTls) {
      return Stream(std::move(socket), server->tls_context());
    } else {
      return Stream(std::move(socket));
    }
  }

  tcp::socket& socket() {
    if constexpr (kTls) {
      return stream_.next_layer();
    } else {
      return stream_;
    }
  }

  void Read() {
    parser_.emplace();
    parser_->body_limit(uint64_t{256} << 20);
    http::async_read(stream_, buffer_, *parser_,
                     [self = this->shared_from_this()](beast::error_code ec, size_t) {
                       if (ec) return self->ForceClose();
                       self->OnRequest();
                     });
  }

  void OnRequest() {
    request_ = parser_->release();
    server_->RequestStarted();
    plan_ = server_->Decide(request_);
    if (plan_.delay_ms > 0) {
      timer_.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double, std::milli>(plan_.delay_ms)));
      timer_.async_wait([self = this->shared_from_this()](beast::error_code ec) {
        if (ec) {
          self->server_->RequestEnded();
          return self->ForceClose();
        }
        self->Respond();
      });
    } else {
      Respond();
    }
  }

  void Respond() {
    if (plan_.fault == MockFault::kHang) {
      // Holds the session (and the socket) until the client closes it or the
      // server stops; the request stays counted as in progress.
      hang_buffer_.clear();
      net::async_read(stream_, hang_buffer_.prepare(1),
                      [self = this->shared_from_this()](beast::error_code, size_t) {
                        self->server_->RequestEnded();
                        self->ForceClose();
                      });
      return;
    }
    if (plan_.fault == MockFault::kReset) {
      server_->RequestEnded();
      // SO_LINGER with a zero timeout turns close() into a TCP reset.
      beast::error_code ignored;
      socket().set_option(net::socket_base::linger(true, 0), ignored);
      socket().close(ignored);
      return;
    }
    response_ = {};
    response_.version(11);
    response_.result(static_cast<unsigned>(plan_.http_status));
    response_.set(http::field::server, "ksearch-mock-llm");
    response_.set(http::field::content_type, "application/json");
    response_.set("x-request-id", "req_mock_" + std::to_string(server_->requests_.load()));
    if (plan_.retry_after_seconds >= 0) {
      response_.set(http::field::retry_after, FormatNumber(plan_.retry_after_seconds));
    }
    response_.keep_alive(request_.keep_alive());
    if (plan_.fault == MockFault::kDisconnectMidBody) {
      // The headers promise the whole body; only half of it comes.
      response_.content_length(plan_.body.size());
      std::ostringstream head;
      head << response_.base();
      raw_ = head.str() + plan_.body.substr(0, plan_.body.size() / 2);
      net::async_write(stream_, net::buffer(raw_),
                       [self = this->shared_from_this()](beast::error_code, size_t) {
                         self->server_->RequestEnded();
                         beast::error_code ignored;
                         self->socket().shutdown(tcp::socket::shutdown_both, ignored);
                         self->socket().close(ignored);
                       });
      return;
    }
    response_.body() = std::move(plan_.body);
    response_.prepare_payload();
    http::async_write(stream_, response_,
                      [self = this->shared_from_this()](beast::error_code ec, size_t) {
                        self->server_->RequestEnded();
                        if (ec) return self->ForceClose();
                        if (!self->response_.keep_alive()) {
                          beast::error_code ignored;
                          self->socket().shutdown(tcp::socket::shutdown_send, ignored);
                          return self->ForceClose();
                        }
                        self->Read();
                      });
  }

  MockLlmServerImpl* server_;
  net::steady_timer timer_;
  Stream stream_;
  beast::flat_buffer buffer_;
  beast::flat_buffer hang_buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::request<http::string_body> request_;
  http::response<http::string_body> response_;
  Plan plan_;
  std::string raw_;
};

void MockLlmServerImpl::Accept() {
  acceptor_.async_accept(net::make_strand(io_), [this](beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
    if (ec) {
      // Out of descriptors, most likely: pause instead of spinning.
      accept_retry_timer_.expires_after(std::chrono::milliseconds(10));
      accept_retry_timer_.async_wait([this](beast::error_code wait_ec) {
        if (!wait_ec) Accept();
      });
      return;
    }
    connections_.fetch_add(1);
    beast::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    if (tls_) {
      auto session = std::make_shared<Session<true>>(std::move(socket), this);
      Register(session);
      session->Start();
    } else {
      auto session = std::make_shared<Session<false>>(std::move(socket), this);
      Register(session);
      session->Start();
    }
    Accept();
  });
}

MockReply MockLlmServerImpl::ChooseReply(const ChatRequest&, const std::string& text) {
  if (!queue_.empty()) {
    MockReply reply = queue_.front();
    if (--queue_.front().repeat <= 0) queue_.pop_front();
    return reply;
  }
  for (auto it = rules_.begin(); it != rules_.end(); ++it) {
    const MockRule& rule = it->rule;
    if (!rule.contains.empty() && text.find(rule.contains) == std::string::npos) continue;
    if (it->regex && !std::regex_search(text, *it->regex)) continue;
    MockReply reply = rule.reply;
    if (it->rule.times > 0 && --it->rule.times == 0) rules_.erase(it);
    return reply;
  }
  return default_reply_;
}

Plan MockLlmServerImpl::Decide(const http::request<http::string_body>& request) {
  Plan plan;
  const std::string target(request.target());
  std::string_view path = target;
  path = path.substr(0, path.find('?'));
  const bool openai = path.ends_with("/chat/completions");
  const bool anthropic = path.ends_with("/messages");
  auto error = [&](int status, const std::string& message) {
    plan.fault = MockFault::kHttpError;
    plan.http_status = status;
    plan.body = anthropic ? llm::BuildAnthropicError(status, message)
                          : llm::BuildOpenAiError(status, message);
    plan.delay_ms = options_.latency_ms;
    return plan;
  };
  if (!openai && !anthropic) {
    return error(404, "mock server: no route " + target +
                          " (POST …/chat/completions or …/v1/messages)");
  }
  if (request.method() != http::verb::post) return error(405, "mock server: use POST");

  std::string key;
  if (openai) {
    auto it = request.find(http::field::authorization);
    if (it != request.end()) {
      std::string_view value = it->value();
      if (value.starts_with("Bearer ")) value.remove_prefix(7);
      key = std::string(value);
    }
  } else {
    auto it = request.find("x-api-key");
    if (it != request.end()) key = std::string(it->value());
    // As the real API: the version header is mandatory.
    if (request.find("anthropic-version") == request.end()) {
      return error(400, "anthropic-version: header is required");
    }
  }
  StatusOr<ChatRequest> parsed = openai ? llm::ParseOpenAiRequest(request.body())
                                        : llm::ParseAnthropicRequest(request.body());
  if (!parsed.ok()) return error(400, "mock server: " + parsed.status().message());

  std::string text = parsed->system;
  for (const ChatMessage& m : parsed->messages) {
    text += "\n";
    text += m.content;
  }
  if (options_.strict) {
    std::string why = openai ? llm::OpenAiConstraintViolation(request.body(), *parsed)
                             : llm::AnthropicConstraintViolation(*parsed);
    if (!why.empty()) {
      std::lock_guard<std::mutex> lock(mutex_);
      history_.push_back(MockRequest{openai ? "openai" : "anthropic", target, *parsed, !key.empty()});
      while (history_.size() > options_.max_recorded_requests) history_.pop_front();
      faults_.fetch_add(1);
      return error(400, why);
    }
  }
  if (options_.context_window_tokens > 0) {
    const int64_t prompt = static_cast<int64_t>(text.size() / 4 + 1);
    if (prompt + parsed->max_tokens > options_.context_window_tokens) {
      std::lock_guard<std::mutex> lock(mutex_);
      history_.push_back(MockRequest{openai ? "openai" : "anthropic", target, *parsed, !key.empty()});
      while (history_.size() > options_.max_recorded_requests) history_.pop_front();
      faults_.fetch_add(1);
      const std::string window = std::to_string(options_.context_window_tokens);
      const std::string asked = std::to_string(prompt + parsed->max_tokens);
      if (openai) {
        plan.fault = MockFault::kHttpError;
        plan.http_status = 400;
        plan.body = llm::BuildOpenAiError(
            400, "This model's maximum context length is " + window +
                     " tokens. However, you requested " + asked +
                     " tokens. Please reduce the length of the messages or completion.",
            "context_length_exceeded");
        return plan;
      }
      return error(400, "prompt is too long: " + asked + " tokens > " + window + " maximum");
    }
  }

  std::lock_guard<std::mutex> lock(mutex_);
  history_.push_back(MockRequest{openai ? "openai" : "anthropic", target, *parsed, !key.empty()});
  while (history_.size() > options_.max_recorded_requests) history_.pop_front();

  if (!options_.required_api_key.empty() && key != options_.required_api_key) {
    faults_.fetch_add(1);
    // Echoed on purpose, as real providers do: clients must redact it.
    return error(401, "Incorrect API key provided: " + key);
  }

  MockReply reply = ChooseReply(*parsed, text);
  if (options_.fault_rate > 0 && reply.fault == MockFault::kNone &&
      std::uniform_real_distribution<double>(0, 1)(rng_) < options_.fault_rate) {
    switch (std::uniform_int_distribution<int>(0, 3)(rng_)) {
      case 0:
        reply.fault = MockFault::kHttpError;
        reply.http_status = 429;
        reply.retry_after_seconds = 0;
        break;
      case 1:
        reply.fault = MockFault::kHttpError;
        reply.http_status = 500;
        break;
      case 2:
        reply.fault = MockFault::kHttpError;
        reply.http_status = 503;
        break;
      default:
        reply.fault = MockFault::kReset;
        break;
    }
  }
  if (reply.fault != MockFault::kNone) faults_.fetch_add(1);

  plan.fault = reply.fault;
  plan.delay_ms = options_.latency_ms + reply.delay_ms;
  plan.retry_after_seconds = reply.retry_after_seconds;
  if (reply.fault == MockFault::kHttpError) {
    plan.http_status = reply.http_status;
    std::string message = reply.error_message.empty()
                              ? "mock: injected HTTP " + std::to_string(reply.http_status)
                              : reply.error_message;
    plan.body = openai ? llm::BuildOpenAiError(reply.http_status, message)
                       : llm::BuildAnthropicError(reply.http_status, message);
    return plan;
  }
  if (reply.fault == MockFault::kRefusal) {
    // The usage BuildOpenAiRefusal reports, and the Anthropic one below.
    BillLocked(20, openai ? 10 : 5);
    plan.body = openai ? llm::BuildOpenAiRefusal("I'm sorry, but I can't help with that.",
                                                 parsed->model)
                       : llm::BuildAnthropicReply("", FinishReason::kOther, 20, 5, parsed->model);
    return plan;
  }
  if (reply.fault == MockFault::kHang) return plan;
  if (reply.fault == MockFault::kMissingFields) {
    plan.body = openai ? R"({"id":"chatcmpl-mock","object":"chat.completion","model":")" +
                             parsed->model + "\"}"
                       : R"({"id":"msg_mock","type":"message","model":")" + parsed->model +
                             "\"}";
    return plan;
  }
  std::string content = std::move(reply.content);
  if (reply.pad_content_to_bytes > content.size()) {
    static constexpr std::string_view kFiller = "// mock padding line to make a huge reply\n";
    content.reserve(reply.pad_content_to_bytes);
    while (content.size() < reply.pad_content_to_bytes) {
      content.append(kFiller.substr(
          0, std::min(kFiller.size(), reply.pad_content_to_bytes - content.size())));
    }
  }
  const int64_t input_tokens =
      reply.input_tokens >= 0 ? reply.input_tokens : static_cast<int64_t>(text.size() / 4 + 1);
  const int64_t output_tokens = reply.output_tokens >= 0
                                    ? reply.output_tokens
                                    : static_cast<int64_t>(content.size() / 4 + 1);
  BillLocked(input_tokens, output_tokens);
  plan.body = openai ? llm::BuildOpenAiReply(content, reply.finish_reason, input_tokens,
                                             output_tokens, parsed->model)
                     : llm::BuildAnthropicReply(content, reply.finish_reason, input_tokens,
                                                output_tokens, parsed->model);
  if (reply.fault == MockFault::kMalformedJson) plan.body.resize(plan.body.size() / 2);
  return plan;
}

}  // namespace internal

StatusOr<std::unique_ptr<MockLlmServer>> MockLlmServer::Start(Options options) {
  try {
    auto impl = std::make_shared<internal::MockLlmServerImpl>(std::move(options));
    KSEARCH_RETURN_IF_ERROR(impl->Listen());
    impl->StartThreads();
    return std::unique_ptr<MockLlmServer>(new MockLlmServer(std::move(impl)));
  } catch (const std::exception& e) {
    return InternalError(std::string("MockLlmServer::Start: ") + e.what());
  }
}

MockLlmServer::MockLlmServer(std::shared_ptr<internal::MockLlmServerImpl> impl)
    : impl_(std::move(impl)) {}

MockLlmServer::~MockLlmServer() { impl_->Stop(); }

uint16_t MockLlmServer::port() const { return impl_->port(); }

std::string MockLlmServer::base_url() const {
  return std::string(impl_->tls() ? "https" : "http") + "://127.0.0.1:" +
         std::to_string(impl_->port());
}

std::string MockLlmServer::openai_base_url() const { return base_url() + "/v1"; }

void MockLlmServer::Enqueue(MockReply reply) { impl_->Enqueue(std::move(reply)); }
Status MockLlmServer::AddRule(MockRule rule) { return impl_->AddRule(std::move(rule)); }
void MockLlmServer::SetDefaultReply(MockReply reply) { impl_->SetDefaultReply(std::move(reply)); }
void MockLlmServer::ClearScript() { impl_->ClearScript(); }

Status MockLlmServer::LoadScript(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("mock script \"" + path + "\": cannot be opened");
  std::stringstream contents;
  contents << in.rdbuf();
  return LoadScriptJson(contents.str()).WithContext(path);
}

Status MockLlmServer::LoadScriptJson(std::string_view json) {
  KSEARCH_ASSIGN_OR_RETURN(llm::MockScript script, llm::ParseMockScript(json));
  // Rules first: a bad regex leaves the server's script untouched.
  std::vector<MockRule> rules = std::move(script.rules);
  for (MockRule& rule : rules) {
    if (!rule.regex.empty()) {
      try {
        std::regex check(rule.regex, std::regex::ECMAScript);
      } catch (const std::regex_error& e) {
        return InvalidArgumentError("mock script: bad regex \"" + rule.regex + "\": " + e.what());
      }
    }
  }
  for (MockRule& rule : rules) KSEARCH_RETURN_IF_ERROR(impl_->AddRule(std::move(rule)));
  for (MockReply& reply : script.queue) impl_->Enqueue(std::move(reply));
  if (script.default_reply) impl_->SetDefaultReply(std::move(*script.default_reply));
  return Status();
}

MockLlmServer::Counters MockLlmServer::counters() const { return impl_->counters(); }
std::vector<MockRequest> MockLlmServer::requests() const { return impl_->requests(); }
void MockLlmServer::Stop() { impl_->Stop(); }

}  // namespace ksearch
