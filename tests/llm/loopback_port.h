// A loopback TCP port for tests of servers that fail: bound to an ephemeral
// port, then either closed at once (nothing listens: connection refused, a
// dead server) or left listening without ever accepting (the kernel completes
// the handshakes and nobody reads: a hung server).
#ifndef KSEARCH_TESTS_LLM_LOOPBACK_PORT_H_
#define KSEARCH_TESTS_LLM_LOOPBACK_PORT_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>

namespace ksearch::testing {

class LoopbackPort {
 public:
  enum class Kind { kDead, kHung };
  explicit LoopbackPort(Kind kind) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
      port_ = ntohs(address.sin_port);
    }
    if (kind == Kind::kHung && fd_ >= 0) {
      ::listen(fd_, 64);
    } else if (fd_ >= 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~LoopbackPort() {
    if (fd_ >= 0) ::close(fd_);
  }
  LoopbackPort(const LoopbackPort&) = delete;
  LoopbackPort& operator=(const LoopbackPort&) = delete;

  uint16_t port() const { return port_; }
  // "http://127.0.0.1:PORT"; OpenAI clients want url() + "/v1".
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

}  // namespace ksearch::testing

#endif  // KSEARCH_TESTS_LLM_LOOPBACK_PORT_H_
