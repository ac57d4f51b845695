// URLs split by Boost.URL (RFC 3986) into the parts ksearch's clients check:
// the LLM client's base URL (llm/http_util.h) and the Redis queue URL
// (queue/redis.h) each apply their own rules to these parts.
//
// Thread safety: stateless functions.
#ifndef KSEARCH_CORE_URL_H_
#define KSEARCH_CORE_URL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ksearch/status.h"

namespace ksearch::internal {

struct UrlParts {
  std::string scheme;          // lower case
  bool has_authority = false;  // "scheme://…"
  bool has_userinfo = false;   // "user:pw@"
  std::string host;            // percent-decoded; an IPv6 address without brackets
  bool has_port = false;       // a ':' after the host, even with no digits
  std::string port;            // the digits as written ("" when absent)
  std::string path;            // as written, percent-encoded
  bool has_query = false;
  bool has_fragment = false;
};

// Errors: kInvalidArgument "not a URL (…)" with Boost.URL's reason, for text
// that is not an absolute URI.
StatusOr<UrlParts> SplitUrl(std::string_view text);

// A port's digits as a number in 1..65535; nullopt otherwise.
std::optional<uint16_t> PortNumber(std::string_view digits);

}  // namespace ksearch::internal

#endif  // KSEARCH_CORE_URL_H_
