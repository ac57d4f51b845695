#include "queue/tls_relay.h"

#include <array>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace ksearch::internal::queue {
namespace {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = asio::ip::tcp;

class TlsRelayImpl;

// One relayed connection: hiredis's plain socket on one side, the TLS stream
// to Redis on the other. Every handler runs on the relay's single I/O thread,
// so the TLS stream is never used from two threads at once.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(TlsRelayImpl& relay, tcp::socket plain, ssl::context& context)
      : relay_(relay), plain_(std::move(plain)), tls_(plain_.get_executor(), context) {}

  void Start(const std::string& host, int port);

 private:
  void Fail(const std::string& what, const boost::system::error_code& ec);
  void Pump(bool to_server);
  void Close() {
    boost::system::error_code ignored;
    plain_.close(ignored);
    tls_.lowest_layer().close(ignored);
  }

  TlsRelayImpl& relay_;
  tcp::socket plain_;
  ssl::stream<tcp::socket> tls_;
  std::array<char, 16384> up_{};    // hiredis -> Redis
  std::array<char, 16384> down_{};  // Redis -> hiredis
  std::string host_;
};

class TlsRelayImpl final : public TlsRelay {
 public:
  TlsRelayImpl(std::string host, int port)
      : host_(std::move(host)), port_(port), context_(ssl::context::tls_client), acceptor_(io_) {}

  ~TlsRelayImpl() override {
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }

  Status Init() {
    boost::system::error_code ec;
    context_.set_verify_mode(ssl::verify_peer, ec);
    const char* ca = std::getenv("KSEARCH_REDIS_CA_FILE");
    if (ca != nullptr && *ca != '\0') {
      context_.load_verify_file(ca, ec);
      if (ec) {
        return InvalidArgumentError(std::string("KSEARCH_REDIS_CA_FILE=") + ca +
                                    ": cannot load the CA certificates (" + ec.message() + ")");
      }
    } else {
      context_.set_default_verify_paths(ec);
    }
    context_.set_verify_callback(ssl::host_name_verification(host_), ec);
    tcp::endpoint local(asio::ip::address_v4::loopback(), 0);
    acceptor_.open(local.protocol(), ec);
    if (!ec) acceptor_.bind(local, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) return InternalError("TLS relay for Redis: cannot listen on loopback: " + ec.message());
    local_port_ = acceptor_.local_endpoint().port();
    Accept();
    thread_ = std::thread([this] { io_.run(); });
    return Status();
  }

  int local_port() const override { return local_port_; }

  std::string last_error() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return last_error_;
  }

  void SetError(std::string error) {
    std::lock_guard<std::mutex> lock(mutex_);
    last_error_ = std::move(error);
  }

 private:
  void Accept() {
    acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket plain) {
      if (ec) return;  // stopped
      std::make_shared<Session>(*this, std::move(plain), context_)->Start(host_, port_);
      Accept();
    });
  }

  std::string host_;
  int port_;
  asio::io_context io_;
  ssl::context context_;
  tcp::acceptor acceptor_;
  int local_port_ = 0;
  std::thread thread_;
  mutable std::mutex mutex_;
  std::string last_error_;
};

void Session::Start(const std::string& host, int port) {
  host_ = host;
  // SNI: servers that host several names pick the certificate by it.
  if (!SSL_set_tlsext_host_name(tls_.native_handle(), host.c_str())) {
    Fail("setting the TLS server name", {});
    return;
  }
  auto self = shared_from_this();
  auto resolver = std::make_shared<tcp::resolver>(plain_.get_executor());
  resolver->async_resolve(
      host, std::to_string(port),
      [self, resolver](boost::system::error_code ec, tcp::resolver::results_type endpoints) {
        if (ec) return self->Fail("resolving", ec);
        asio::async_connect(
            self->tls_.lowest_layer(), endpoints,
            [self](boost::system::error_code ec2, const tcp::endpoint&) {
              if (ec2) return self->Fail("connecting", ec2);
              self->tls_.async_handshake(ssl::stream_base::client,
                                         [self](boost::system::error_code ec3) {
                                           if (ec3) return self->Fail("TLS handshake", ec3);
                                           self->relay_.SetError("");
                                           self->Pump(true);
                                           self->Pump(false);
                                         });
            });
      });
}

void Session::Fail(const std::string& what, const boost::system::error_code& ec) {
  std::string why = what + " " + host_;
  if (ec) why += ": " + ec.message();
  relay_.SetError(why);
  Close();
}

// Copies one direction until either side closes; then closes both, so that
// hiredis sees the connection end and reconnects as it would without TLS.
void Session::Pump(bool to_server) {
  auto self = shared_from_this();
  auto& buffer = to_server ? up_ : down_;
  auto on_read = [self, to_server, &buffer](boost::system::error_code ec, size_t n) {
    if (ec) return self->Close();
    auto on_write = [self, to_server](boost::system::error_code ec2, size_t) {
      if (ec2) return self->Close();
      self->Pump(to_server);
    };
    if (to_server) {
      asio::async_write(self->tls_, asio::buffer(buffer.data(), n), on_write);
    } else {
      asio::async_write(self->plain_, asio::buffer(buffer.data(), n), on_write);
    }
  };
  if (to_server) {
    plain_.async_read_some(asio::buffer(buffer), on_read);
  } else {
    tls_.async_read_some(asio::buffer(buffer), on_read);
  }
}

}  // namespace

StatusOr<std::unique_ptr<TlsRelay>> TlsRelay::Start(const std::string& host, int port) {
  auto relay = std::make_unique<TlsRelayImpl>(host, port);
  KSEARCH_RETURN_IF_ERROR(relay->Init());
  return std::unique_ptr<TlsRelay>(std::move(relay));
}

}  // namespace ksearch::internal::queue
