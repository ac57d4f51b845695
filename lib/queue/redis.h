// A small synchronous Redis client over hiredis: commands as argument
// vectors, replies copied into plain values, and reconnection built in, so
// that the queue's code reads as the commands it sends.
//
// Reconnection: a command whose connection breaks (Redis restarted, a
// network hiccup, a read past its time limit) is sent again on a new
// connection until QueueOptions::reconnect_timeout_seconds have passed. Every
// command the queue sends is safe to repeat (its scripts check before they
// write), which is what makes this sound. "LOADING" (Redis reading its
// append-only file after a restart) is waited out the same way.
//
// Thread safety: one Redis object per thread.
#ifndef KSEARCH_QUEUE_REDIS_H_
#define KSEARCH_QUEUE_REDIS_H_

#include <memory>
#include <string>
#include <vector>

#include "ksearch/queue.h"
#include "ksearch/status.h"
#include "queue/tls_relay.h"

struct redisContext;

namespace ksearch::internal::queue {

struct Reply {
  enum Type { kNil, kString, kInteger, kArray, kStatus, kError };
  Type type = kNil;
  std::string str;  // kString, kStatus, kError
  long long integer = 0;
  std::vector<Reply> elements;

  bool nil() const { return type == kNil; }
  bool error() const { return type == kError; }
};

class Redis {
 public:
  // Connects, authenticates (environment, see queue.h) and selects the DB.
  static StatusOr<std::unique_ptr<Redis>> Connect(const QueueOptions& options);
  ~Redis();
  Redis(const Redis&) = delete;
  Redis& operator=(const Redis&) = delete;

  // Sends one command. An error reply from Redis is returned as a Reply of
  // type kError when `error_ok`, else as kInternal naming the command (WRONGPASS
  // and NOAUTH as kUnauthenticated, NOPERM as kPermissionDenied). `block_ms`
  // is how long the command itself may block in Redis (XREAD BLOCK), added to
  // the read time limit.
  StatusOr<Reply> Command(const std::vector<std::string>& argv, int block_ms = 0,
                          bool error_ok = false);

  const RedisUrl& url() const { return url_; }

 private:
  Redis(QueueOptions options, RedisUrl url) : options_(std::move(options)), url_(std::move(url)) {}
  Status Open();
  void Close();

  QueueOptions options_;
  RedisUrl url_;
  // rediss:// without hiredis_ssl: hiredis talks to this relay on loopback.
  std::unique_ptr<TlsRelay> relay_;
  redisContext* context_ = nullptr;
  int timeout_ms_ = -1;
};

// The key layout (docs/queue.md).
struct Keys {
  std::string prefix;
  std::string Problem(const std::string& fingerprint) const;
  std::string Jobs(const std::string& arch, const std::string& model) const;
  std::string Results(const std::string& run) const;
  std::string Workers(const std::string& run) const;
  std::string Done(const std::string& run) const;
  std::string Queued(const std::string& run) const;
  std::string Duplicates(const std::string& run) const;
};
inline constexpr char kGroup[] = "workers";

// Letters, digits, '.', '-' and '_' kept; anything else becomes '_' ("NVIDIA
// H200" -> "NVIDIA_H200"), so that names are safe inside keys.
std::string Slug(const std::string& text);

// Creates the consumer group on `stream` (and the stream) unless it exists.
// The group starts at the stream's beginning: jobs added before it existed
// are still served.
Status EnsureGroup(Redis& redis, const std::string& stream);

// Field `name` of a stream entry's field/value array; empty when absent.
std::string Field(const Reply& fields, const std::string& name);

// The marker at the start of the message of a job the queue gave up on.
inline constexpr char kGaveUpPrefix[] = "the queue gave up on this job";

}  // namespace ksearch::internal::queue

#endif  // KSEARCH_QUEUE_REDIS_H_
