// The ksearch version.
#ifndef KSEARCH_VERSION_H_
#define KSEARCH_VERSION_H_

#include <string_view>

namespace ksearch {
// "MAJOR.MINOR.PATCH".
std::string_view Version();
}  // namespace ksearch

#endif  // KSEARCH_VERSION_H_
