// TLS for rediss:// when hiredis has no TLS of its own (Debian 12 ships
// hiredis 0.14, without hiredis_ssl): a relay on a loopback port that hiredis
// connects to in plain text, forwarding each connection over TLS (OpenSSL via
// Asio) to the Redis server. The server's certificate is verified against the
// system's trusted CAs, or the PEM file named by $KSEARCH_REDIS_CA_FILE, and
// must name the URL's host (DNS name or IP address).
//
// Thread safety: one I/O thread owned by the relay; last_error() may be read
// from any thread.
#ifndef KSEARCH_LIB_QUEUE_TLS_RELAY_H_
#define KSEARCH_LIB_QUEUE_TLS_RELAY_H_

#include <memory>
#include <string>

#include "ksearch/status.h"

namespace ksearch::internal::queue {

class TlsRelay {
 public:
  // Listens on 127.0.0.1 (an ephemeral port) for connections to relay to
  // host:port. Errors: kInvalidArgument (an unreadable CA file), kInternal.
  [[nodiscard]] static StatusOr<std::unique_ptr<TlsRelay>> Start(const std::string& host, int port);
  virtual ~TlsRelay() = default;

  // The loopback port hiredis should connect to.
  virtual int local_port() const = 0;
  // Why the last relayed connection failed (connect, handshake, verification),
  // or empty.
  virtual std::string last_error() const = 0;
};

}  // namespace ksearch::internal::queue

#endif  // KSEARCH_LIB_QUEUE_TLS_RELAY_H_
