// The compiled parts of Boost.Asio, Asio's SSL support and Beast, built once
// for the whole library. lib/llm/CMakeLists.txt defines
// BOOST_ASIO_SEPARATE_COMPILATION and BOOST_BEAST_SEPARATE_COMPILATION on the
// ksearch target, so every other translation unit that includes Asio or Beast
// compiles only declarations and templates, and links against these.
#include <boost/asio/impl/src.hpp>
#include <boost/asio/ssl/impl/src.hpp>
#include <boost/beast/src.hpp>
