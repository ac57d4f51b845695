// `ksearch --version`, on the program and on every command.
#ifndef KSEARCH_TOOLS_VERSION_TEXT_H_
#define KSEARCH_TOOLS_VERSION_TEXT_H_

#include <string>

namespace ksearch::cli {

// The version and the source commit it was built from; the CUDA toolkit it
// was built against and the NVRTC it loaded; the CUDA driver (the CUDA
// version it supports, or why there is none); where the worker and the
// compile helper were found (or why not). Loads the driver, so it is computed
// only when asked for.
std::string VersionText();

}  // namespace ksearch::cli

#endif  // KSEARCH_TOOLS_VERSION_TEXT_H_
