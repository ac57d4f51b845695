// ksearch-compile: compiles one untrusted candidate source in a confined
// process. Started by the library (cuda/compile_helper.h), never by hand.
#include "cuda/compile_helper.h"

int main(int argc, char** argv) { return ksearch::internal::CompileHelperMain(argc, argv); }
