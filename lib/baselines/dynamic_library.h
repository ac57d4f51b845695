// dlopen and dlsym for the vendor-library baselines: ksearch neither links
// nor requires the libraries, so each baseline opens its own and resolves
// the entry points it calls, and a missing one is an error that names it.
#ifndef KSEARCH_BASELINES_DYNAMIC_LIBRARY_H_
#define KSEARCH_BASELINES_DYNAMIC_LIBRARY_H_

#include <dlfcn.h>

#include <string>

#include "ksearch/status.h"

namespace ksearch::internal {

// Resolves `symbol` from `library` into `fn`, or returns kNotFound.
template <typename Fn>
Status Resolve(void* library, const char* library_name, const char* symbol, Fn* fn) {
  *fn = reinterpret_cast<Fn>(::dlsym(library, symbol));
  if (!*fn) return NotFoundError(std::string(library_name) + " has no symbol " + symbol);
  return Status::Ok();
}

// The library's handle (never closed: the baselines' function pointers live
// as long as the process), or kNotFound with dlerror's reason.
inline StatusOr<void*> Open(const char* name) {
  void* library = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char* reason = ::dlerror();
    return NotFoundError(std::string("cannot load ") + name + " (" + (reason ? reason : "unknown") +
                         ")");
  }
  return library;
}

}  // namespace ksearch::internal

#endif  // KSEARCH_BASELINES_DYNAMIC_LIBRARY_H_
