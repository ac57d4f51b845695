#include "core/url.h"

#include <algorithm>
#include <boost/url/parse.hpp>
#include <boost/url/url_view.hpp>
#include <cctype>
// Boost 1.81 ships Boost.URL without a compiled library: its sources are
// built here, once (this is the library's only translation unit that uses it).
#include <boost/url/src.hpp>

namespace ksearch::internal {

StatusOr<UrlParts> SplitUrl(std::string_view text) {
  auto parsed = boost::urls::parse_uri(text);
  if (!parsed) return InvalidArgumentError("not a URL (" + parsed.error().message() + ")");
  const boost::urls::url_view& url = *parsed;
  // RFC 3986 3.3: after an authority the path is empty or starts with '/'.
  // Boost.URL 1.81 accepts "redis://h:x1" as port "" and path "x1".
  if (url.has_authority() && !url.encoded_path().empty() && url.encoded_path().front() != '/') {
    return InvalidArgumentError("not a URL (the port must be digits, and a path after the host "
                                "must start with '/')");
  }
  UrlParts parts;
  parts.scheme = std::string(url.scheme());
  std::transform(parts.scheme.begin(), parts.scheme.end(), parts.scheme.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  parts.has_authority = url.has_authority();
  parts.has_userinfo = url.has_userinfo();
  parts.host = url.host_address();
  parts.has_port = url.has_port();
  parts.port = std::string(url.port());
  parts.path = std::string(url.encoded_path());
  parts.has_query = url.has_query();
  parts.has_fragment = url.has_fragment();
  return parts;
}

std::optional<uint16_t> PortNumber(std::string_view digits) {
  if (digits.empty() || digits.size() > 5) return std::nullopt;
  int value = 0;
  for (char c : digits) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    value = value * 10 + (c - '0');
  }
  if (value < 1 || value > 65535) return std::nullopt;
  return static_cast<uint16_t>(value);
}

}  // namespace ksearch::internal
