#include "queue/redis.h"

#include <hiredis/hiredis.h>
#ifdef KSEARCH_HAVE_HIREDIS_SSL
#include <hiredis/hiredis_ssl.h>
#endif

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "core/url.h"

namespace ksearch {

std::string RedisUrl::ToString() const {
  return std::string(tls ? "rediss://" : "redis://") + host + ":" + std::to_string(port) + "/" +
         std::to_string(db);
}

StatusOr<RedisUrl> ParseRedisUrl(std::string_view text) {
  const std::string url(text);
  auto bad = [&](const std::string& why) {
    return InvalidArgumentError("queue URL '" + url + "': " + why +
                                " (expected redis://HOST[:PORT][/DB] or rediss://…)");
  };
  StatusOr<internal::UrlParts> parts = internal::SplitUrl(text);
  if (!parts.ok() && text.find("://") != std::string_view::npos) {
    return bad(parts.status().message());
  }
  if (!parts.ok() || !parts->has_authority) return bad("no scheme");
  if (parts->scheme != "redis" && parts->scheme != "rediss") {
    return bad("scheme '" + parts->scheme + "' is not redis or rediss");
  }
  RedisUrl out;
  out.tls = parts->scheme == "rediss";
  if (parts->has_userinfo) {
    // A password in the URL would show in `ps` on every host of the fleet.
    return bad(
        "credentials in the URL are not accepted (they would show in process listings); set "
        "KSEARCH_REDIS_PASSWORD and, for an ACL user, KSEARCH_REDIS_USER instead");
  }
  if (parts->has_query || parts->has_fragment) {
    return bad("query parameters and fragments are not supported");
  }
  out.host = parts->host;
  if (out.host.empty()) return bad("no host");
  if (parts->has_port) {
    std::optional<uint16_t> port = internal::PortNumber(parts->port);
    if (!port) return bad("port '" + parts->port + "' is not a number in 1..65535");
    out.port = *port;
  }
  std::string_view db = parts->path;
  if (db.starts_with("/")) db.remove_prefix(1);
  if (!db.empty()) {
    bool digits = db.size() <= 7 && std::all_of(db.begin(), db.end(), [](char c) {
      return std::isdigit(static_cast<unsigned char>(c));
    });
    long value = digits ? std::strtol(std::string(db).c_str(), nullptr, 10) : -1;
    if (value < 0 || value > (1 << 20)) {
      return bad("database '" + std::string(db) + "' is not a number");
    }
    out.db = int(value);
  }
  return out;
}

}  // namespace ksearch

namespace ksearch::internal::queue {
namespace {

Reply Copy(const redisReply* r) {
  Reply out;
  switch (r->type) {
    case REDIS_REPLY_STRING:
      out.type = Reply::kString;
      break;
    case REDIS_REPLY_STATUS:
      out.type = Reply::kStatus;
      break;
    case REDIS_REPLY_ERROR:
      out.type = Reply::kError;
      break;
    case REDIS_REPLY_INTEGER:
      out.type = Reply::kInteger;
      break;
    case REDIS_REPLY_ARRAY:
      out.type = Reply::kArray;
      break;
    default:
      out.type = Reply::kNil;
      break;
  }
  if (r->str) out.str.assign(r->str, r->len);
  out.integer = r->integer;
  for (size_t i = 0; i < r->elements; ++i) out.elements.push_back(Copy(r->element[i]));
  return out;
}

timeval ToTimeval(int ms) { return timeval{ms / 1000, (ms % 1000) * 1000}; }

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

Status ErrorReplyStatus(const std::string& command, const std::string& text, const RedisUrl& url) {
  std::string where = url.ToString() + ": " + command + ": " + text;
  if (text.starts_with("WRONGPASS") || text.starts_with("NOAUTH") ||
      text.find("invalid password") != std::string::npos)
    return UnauthenticatedError(
        where + " (set KSEARCH_REDIS_PASSWORD, and KSEARCH_REDIS_USER for an ACL user)");
  if (text.starts_with("NOPERM")) return PermissionDeniedError(where);
  return InternalError(where);
}

}  // namespace

StatusOr<std::unique_ptr<Redis>> Redis::Connect(const QueueOptions& options) {
  KSEARCH_ASSIGN_OR_RETURN(RedisUrl url, ParseRedisUrl(options.url));
  std::unique_ptr<Redis> redis(new Redis(options, url));
#ifndef KSEARCH_HAVE_HIREDIS_SSL
  // hiredis without TLS (Debian 12's 0.14): through a loopback relay.
  if (url.tls) {
    KSEARCH_ASSIGN_OR_RETURN(redis->relay_, TlsRelay::Start(url.host, url.port));
  }
#endif
  // The first connection is not retried for long: a wrong host should fail
  // fast, a restart in progress is the reconnect loop's business.
  KSEARCH_RETURN_IF_ERROR(redis->Open());
  KSEARCH_ASSIGN_OR_RETURN(Reply pong, redis->Command({"PING"}));
  (void)pong;
  return redis;
}

Redis::~Redis() { Close(); }

void Redis::Close() {
  if (context_) redisFree(context_);
  context_ = nullptr;
  timeout_ms_ = -1;
}

Status Redis::Open() {
  Close();
  int connect_ms = std::max(1, int(options_.connect_timeout_seconds * 1000));
  context_ = relay_ ? redisConnectWithTimeout("127.0.0.1", relay_->local_port(), ToTimeval(connect_ms))
                    : redisConnectWithTimeout(url_.host.c_str(), url_.port, ToTimeval(connect_ms));
  if (!context_ || context_->err) {
    std::string why = context_ ? context_->errstr : "out of memory";
    Close();
    return UnavailableError("cannot connect to Redis at " + url_.ToString() + ": " + why);
  }
#ifdef KSEARCH_HAVE_HIREDIS_SSL
  if (url_.tls) {
    redisSSLContextError ssl_error;
    redisSSLContext* ssl =
        redisCreateSSLContext(nullptr, nullptr, nullptr, nullptr, url_.host.c_str(), &ssl_error);
    if (!ssl || redisInitiateSSLWithContext(context_, ssl) != REDIS_OK) {
      Close();
      return UnavailableError("TLS with Redis at " + url_.ToString() + " failed");
    }
  }
#endif
  std::string password = Env("KSEARCH_REDIS_PASSWORD");
  if (password.empty()) password = Env("REDISCLI_AUTH");
  std::string user = Env("KSEARCH_REDIS_USER");
  auto send = [&](std::vector<std::string> argv, const char* shown) -> Status {
    std::vector<const char*> args;
    std::vector<size_t> lengths;
    for (const std::string& a : argv) {
      args.push_back(a.data());
      lengths.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(
        redisCommandArgv(context_, int(args.size()), args.data(), lengths.data()));
    if (!r) {
      std::string why = context_->errstr;
      if (relay_ && !relay_->last_error().empty()) why = relay_->last_error();
      Close();
      return UnavailableError("Redis at " + url_.ToString() + ": " + shown + ": " + why);
    }
    Reply reply = Copy(r);
    freeReplyObject(r);
    if (reply.error()) return ErrorReplyStatus(shown, reply.str, url_);
    return Status();
  };
  if (!password.empty()) {
    std::vector<std::string> auth = {"AUTH"};
    if (!user.empty()) auth.push_back(user);
    auth.push_back(password);
    // The password never enters a message: only the word AUTH is shown.
    if (Status s = send(auth, "AUTH"); !s.ok()) {
      Close();
      return s;
    }
  }
  if (url_.db != 0) {
    if (Status s = send({"SELECT", std::to_string(url_.db)}, "SELECT"); !s.ok()) {
      Close();
      return s;
    }
  }
  return Status();
}

StatusOr<Reply> Redis::Command(const std::vector<std::string>& argv, int block_ms, bool error_ok) {
  using Clock = std::chrono::steady_clock;
  auto deadline =
      Clock::now() + std::chrono::milliseconds(int64_t(options_.reconnect_timeout_seconds * 1000));
  int backoff_ms = 20;
  Status last;
  for (;;) {
    if (!context_) last = Open();
    if (context_) {
      // Reads wait for what Redis may legitimately take: the block time plus
      // a margin; past it the connection is treated as lost.
      int want = block_ms + std::max(1000, int(options_.connect_timeout_seconds * 1000));
      if (want != timeout_ms_) {
        redisSetTimeout(context_, ToTimeval(want));
        timeout_ms_ = want;
      }
      std::vector<const char*> args;
      std::vector<size_t> lengths;
      for (const std::string& a : argv) {
        args.push_back(a.data());
        lengths.push_back(a.size());
      }
      auto* r = static_cast<redisReply*>(
          redisCommandArgv(context_, int(args.size()), args.data(), lengths.data()));
      if (r) {
        Reply reply = Copy(r);
        freeReplyObject(r);
        if (reply.error() && reply.str.starts_with("LOADING")) {
          last = UnavailableError("Redis at " + url_.ToString() + " is loading its data");
        } else if (reply.error() && !error_ok) {
          return ErrorReplyStatus(argv.empty() ? "" : argv[0], reply.str, url_);
        } else {
          return reply;
        }
      } else {
        std::string why = context_->errstr;
        // Through the TLS relay, the relay knows why: a certificate that
        // does not verify will not verify on the next attempt either.
        std::string relay_error = relay_ ? relay_->last_error() : "";
        if (!relay_error.empty()) why = relay_error;
        last = UnavailableError("Redis at " + url_.ToString() + ": " +
                                (argv.empty() ? "" : argv[0]) + ": " + why);
        Close();
        if (relay_error.starts_with("TLS handshake")) return last;
      }
    }
    if (last.code() == StatusCode::kUnauthenticated || last.code() == StatusCode::kPermissionDenied)
      return last;
    if (Clock::now() >= deadline)
      return UnavailableError(last.message() + " (gave up after " +
                              std::to_string(int(options_.reconnect_timeout_seconds)) +
                              " s of reconnecting)");
    std::this_thread::sleep_for(std::chrono::milliseconds(backoff_ms));
    backoff_ms = std::min(backoff_ms * 2, 1000);
  }
}

std::string Slug(const std::string& text) {
  std::string out = text;
  for (char& c : out) {
    if (!std::isalnum(uint8_t(c)) && c != '.' && c != '-' && c != '_') c = '_';
  }
  return out;
}

std::string Keys::Problem(const std::string& fingerprint) const {
  return prefix + ":problem:" + fingerprint;
}
std::string Keys::Jobs(const std::string& arch, const std::string& model) const {
  return prefix + ":jobs:" + Slug(arch) + (model.empty() ? "" : ":" + Slug(model));
}
std::string Keys::Results(const std::string& run) const {
  return prefix + ":run:" + run + ":results";
}
std::string Keys::Workers(const std::string& run) const {
  return prefix + ":run:" + run + ":workers";
}
std::string Keys::Done(const std::string& run) const { return prefix + ":run:" + run + ":done"; }
std::string Keys::Queued(const std::string& run) const {
  return prefix + ":run:" + run + ":queued";
}
std::string Keys::Duplicates(const std::string& run) const {
  return prefix + ":run:" + run + ":duplicates";
}

Status EnsureGroup(Redis& redis, const std::string& stream) {
  KSEARCH_ASSIGN_OR_RETURN(
      Reply reply, redis.Command({"XGROUP", "CREATE", stream, kGroup, "0", "MKSTREAM"}, 0, true));
  if (reply.error() && !reply.str.starts_with("BUSYGROUP"))
    return InternalError("Redis at " + redis.url().ToString() + ": XGROUP CREATE " + stream + ": " +
                         reply.str);
  return Status();
}

std::string Field(const Reply& fields, const std::string& name) {
  for (size_t i = 0; i + 1 < fields.elements.size(); i += 2) {
    if (fields.elements[i].str == name) return fields.elements[i + 1].str;
  }
  return "";
}

}  // namespace ksearch::internal::queue
