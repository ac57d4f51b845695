#include "ksearch/version.h"

namespace ksearch {
std::string_view Version() { return KSEARCH_VERSION_STRING; }
}  // namespace ksearch
