#include "cuda/compiler.h"

#include <nvrtc.h>
#include <sys/stat.h>

#include <boost/json.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <sstream>
#include <thread>

#include "core/evaluation_json.h"
#include "core/file_util.h"
#include "core/hash.h"
#include "cuda/compile_helper.h"
#include "cuda/sandbox.h"
#include "cuda/standin_headers.h"
#include "worker/process.h"

namespace ksearch::internal {
namespace {

using Clock = std::chrono::steady_clock;

std::string NvrtcError(nvrtcResult result, const char* call) {
  return std::string(call) + ": " + nvrtcGetErrorString(result);
}

std::string Truncate(std::string log, int64_t limit) {
  if (limit <= 0 || static_cast<int64_t>(log.size()) <= limit) return log;
  size_t total = log.size();
  size_t cut = static_cast<size_t>(limit);
  // Not inside a UTF-8 sequence.
  while (cut > 0 && (static_cast<unsigned char>(log[cut]) & 0xc0) == 0x80) --cut;
  log.resize(cut);
  log += "\n[ksearch: log truncated: showing the first " + std::to_string(limit) + " of " +
         std::to_string(total) + " bytes]\n";
  return log;
}

std::string RefusalMessage(const Status& confinement) {
  return "untrusted sources are not compiled here: no confinement is available (" +
         confinement.message() +
         "); --unsandboxed-compile (EvaluatorOptions::allow_unsandboxed_compile) compiles them "
         "without it";
}

// The outcome of one NVRTC run, shared between the compiling thread and the
// waiter, which may give up on it at the deadline.
struct CompileJob {
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
  CompileResult result;
};

}  // namespace

CompileResult CompileWithNvrtc(const CompileRequest& request, int64_t max_log_bytes) {
  CompileResult result;
  auto start = Clock::now();
  std::vector<const char*> header_texts, header_names;
  for (const StandinHeader& h : kStandinHeaders) {
    header_names.push_back(h.name);
    header_texts.push_back(h.text);
  }
  nvrtcProgram program = nullptr;
  nvrtcResult created =
      nvrtcCreateProgram(&program, request.source.c_str(), request.name.c_str(),
                         static_cast<int>(header_texts.size()), header_texts.data(),
                         header_names.data());
  if (created != NVRTC_SUCCESS) {
    result.log = NvrtcError(created, "nvrtcCreateProgram");
  } else {
    std::string include = Compiler::CudaIncludeDirectory();
    std::vector<std::string> options = {"--gpu-architecture=" + request.arch, "--std=c++17",
                                        "-I" + include, "-I" + include + "/cccl",
                                        "--ptxas-options=-v"};
    options.insert(options.end(), request.options.begin(), request.options.end());
    std::vector<const char*> argv;
    for (const std::string& o : options) argv.push_back(o.c_str());
    nvrtcResult compiled = nvrtcCompileProgram(program, static_cast<int>(argv.size()), argv.data());
    size_t log_size = 0;
    if (nvrtcGetProgramLogSize(program, &log_size) == NVRTC_SUCCESS && log_size > 1) {
      std::string log(log_size, '\0');
      nvrtcGetProgramLog(program, log.data());
      log.resize(log_size - 1);
      result.resources = ParsePtxasLog(log);
      result.log = Truncate(EscapeLog(log), max_log_bytes);
    }
    if (compiled == NVRTC_SUCCESS) {
      size_t cubin_size = 0;
      nvrtcResult got = nvrtcGetCUBINSize(program, &cubin_size);
      if (got == NVRTC_SUCCESS && cubin_size > 0) {
        result.cubin.resize(cubin_size);
        got = nvrtcGetCUBIN(program, result.cubin.data());
      }
      if (got != NVRTC_SUCCESS || cubin_size == 0) {
        result.log += "\n" + NvrtcError(got, "nvrtcGetCUBIN") +
                      " (is the arch a real architecture such as sm_90?)";
        result.cubin.clear();
      } else {
        result.ok = true;
      }
    } else if (result.log.empty()) {
      result.log = NvrtcError(compiled, "nvrtcCompileProgram");
    }
    nvrtcDestroyProgram(&program);
  }
  result.compile_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  return result;
}


Compiler::Compiler(CompilerOptions options) : options_(std::move(options)) {
  if (!options_.cache_dir.empty()) {
    std::string path;
    std::stringstream parts(options_.cache_dir);
    std::string part;
    // mkdir -p; failures surface later as cache misses, never as errors.
    if (options_.cache_dir[0] == '/') path = "";
    while (std::getline(parts, part, '/')) {
      if (part.empty()) continue;
      path += "/" + part;
      if (options_.cache_dir[0] != '/' && path.size() == part.size() + 1) path = part;
      ::mkdir(path.c_str(), 0755);
    }
  }
}

std::string Compiler::NvrtcVersion() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "unknown";
  return std::to_string(major) + "." + std::to_string(minor);
}

std::vector<std::string> Compiler::SupportedArchs() {
  std::vector<std::string> out;
  int count = 0;
  if (nvrtcGetNumSupportedArchs(&count) != NVRTC_SUCCESS || count <= 0) return out;
  std::vector<int> archs(static_cast<size_t>(count));
  if (nvrtcGetSupportedArchs(archs.data()) != NVRTC_SUCCESS) return out;
  for (int a : archs) out.push_back("sm_" + std::to_string(a));
  return out;
}

std::string Compiler::CudaIncludeDirectory() {
  if (const char* env = std::getenv("KSEARCH_CUDA_INCLUDE_DIR"); env && *env) return env;
  struct stat info {};
  for (const char* candidate : {KSEARCH_CUDA_INCLUDE_DIR, "/usr/local/cuda/include"}) {
    std::string header = std::string(candidate) + "/cuda_fp16.h";
    if (::stat(header.c_str(), &info) == 0) return candidate;
  }
  return KSEARCH_CUDA_INCLUDE_DIR;
}

std::string Compiler::CacheKey(const CompileRequest& request) {
  Hasher hasher;
  hasher.Add("ksearch-compile-v2").Add(request.source).Add(request.arch).Add(NvrtcVersion());
  for (const std::string& o : request.options) hasher.Add(o);
  for (const StandinHeader& h : kStandinHeaders) hasher.Add(h.name).Add(h.text);
  return hasher.HexDigest();
}

int64_t Compiler::hits() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return hits_;
}

int64_t Compiler::misses() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return misses_;
}

StatusOr<CompileResult> Compiler::Compile(const CompileRequest& request) {
  if (request.arch.rfind("sm_", 0) != 0) {
    return InvalidArgumentError("arch '" + request.arch + "': expected a real architecture such as sm_90");
  }
  std::string key = CacheKey(request);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = memory_.find(key);
    if (it != memory_.end()) {
      ++hits_;
      lru_.splice(lru_.begin(), lru_, it->second.second);
      CompileResult result = it->second.first;
      result.cached = true;
      return result;
    }
  }
  CompileResult result;
  if (LoadFromDisk(key, &result)) {
    Remember(key, result);
    std::lock_guard<std::mutex> lock(mutex_);
    ++hits_;
    result.cached = true;
    return result;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++misses_;
  }
  if (request.trusted) {
    result = CompileUncached(request);
  } else if (Status confinement = ConfinementAvailable(); confinement.ok()) {
    HelperOptions helper;
    helper.binary = options_.helper_binary;
    helper.timeout_seconds = options_.timeout_seconds;
    helper.memory_limit_bytes = options_.memory_limit_bytes;
    helper.max_log_bytes = options_.max_log_bytes;
    KSEARCH_ASSIGN_OR_RETURN(result, CompileInHelper(request, helper));
  } else if (options_.allow_unsandboxed) {
    result = CompileUncached(request);
    result.unsandboxed = true;
  } else {
    return FailedPreconditionError(RefusalMessage(confinement));
  }
  if (result.timed_out || result.helper_died) return result;
  Remember(key, result);
  // What an unconfined compile logged could hold any file's text: it stays
  // out of the disk cache, which confined runs read too.
  if (!result.unsandboxed) StoreToDisk(key, result);
  return result;
}

CompileResult Compiler::CompileUncached(const CompileRequest& request) {
  // NVRTC cannot be interrupted: the compile runs on its own thread and the
  // caller stops waiting at the deadline. The abandoned thread finishes (or
  // not) on its own; the job it writes to is kept alive by the shared_ptr.
  // Only trusted sources (and untrusted ones where the user allowed
  // unconfined compiles) come here; the others run in a helper process that
  // is killed at the deadline.
  auto job = std::make_shared<CompileJob>();
  std::thread worker([job, request, limit = options_.max_log_bytes] {
    CompileResult result = CompileWithNvrtc(request, limit);
    std::lock_guard<std::mutex> lock(job->mutex);
    job->result = std::move(result);
    job->done = true;
    job->done_cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(job->mutex);
  bool finished = job->done_cv.wait_for(
      lock, std::chrono::duration<double>(options_.timeout_seconds), [&] { return job->done; });
  if (finished) {
    lock.unlock();
    worker.join();
    return std::move(job->result);
  }
  lock.unlock();
  worker.detach();
  CompileResult result;
  result.timed_out = true;
  result.compile_ms = options_.timeout_seconds * 1000.0;
  result.log = "ksearch: NVRTC did not finish within " + std::to_string(options_.timeout_seconds) +
               " s; the compile was abandoned";
  return result;
}

void Compiler::Remember(const std::string& key, const CompileResult& result) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (memory_.count(key)) return;
  lru_.push_front(key);
  memory_.emplace(key, std::make_pair(result, lru_.begin()));
  while (memory_.size() > options_.memory_entries && !lru_.empty()) {
    memory_.erase(lru_.back());
    lru_.pop_back();
  }
}

bool Compiler::LoadFromDisk(const std::string& key, CompileResult* result) {
  if (options_.cache_dir.empty()) return false;
  std::string base = options_.cache_dir + "/" + key;
  auto meta = ReadFile(base + ".json");
  if (!meta.ok()) return false;
  auto read = CompileResultFromJson(*meta, base + ".json");
  // A stale or foreign file: recompile.
  if (!read.ok()) return false;
  *result = std::move(*read);
  if (result->ok) {
    auto cubin = ReadFile(base + ".cubin", 1u << 30);
    if (!cubin.ok() || cubin->empty()) return false;
    result->cubin = std::move(*cubin);
  }
  return true;
}

void Compiler::StoreToDisk(const std::string& key, const CompileResult& result) {
  if (options_.cache_dir.empty()) return;
  std::string base = options_.cache_dir + "/" + key;
  // The cubin goes first so that a reader never finds metadata without it.
  if (result.ok && !WriteFileAtomically(base + ".cubin", result.cubin).ok()) return;
  WriteFileAtomically(base + ".json", boost::json::serialize(CompileResultToJson(result)))
      .IgnoreError();
}

boost::json::object CompileResultToJson(const CompileResult& result) {
  return {{"ok", result.ok},
          {"timed_out", result.timed_out},
          {"cached", result.cached},
          {"log", result.log},
          {"compile_ms", NumberToJson(result.compile_ms)},
          {"resources", ResourcesToJson(result.resources)}};
}

StatusOr<CompileResult> CompileResultFromNode(const JsonNode& node) {
  CompileResult result;
  KSEARCH_ASSIGN_OR_RETURN(JsonNode ok, node.Required("ok"));
  KSEARCH_ASSIGN_OR_RETURN(result.ok, ok.Bool());
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "timed_out", &result.timed_out));
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "cached", &result.cached));
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "log", &result.log));
  KSEARCH_RETURN_IF_ERROR(ReadMember(node, "compile_ms", &result.compile_ms));
  KSEARCH_ASSIGN_OR_RETURN(std::optional<JsonNode> resources, node.Find("resources"));
  if (resources) {
    KSEARCH_ASSIGN_OR_RETURN(result.resources, ResourcesFromNode(*resources));
  }
  return result;
}

StatusOr<CompileResult> CompileResultFromJson(std::string_view json, std::string_view origin) {
  KSEARCH_ASSIGN_OR_RETURN(std::unique_ptr<JsonDocument> doc, JsonDocument::Parse(json, origin));
  return CompileResultFromNode(JsonNode::Root(*doc));
}

std::vector<KernelResources> ParsePtxasLog(const std::string& log) {
  std::vector<KernelResources> out;
  static const std::regex kEntry(R"(Compiling entry function '([^']+)')");
  static const std::regex kFrame(
      R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex kUsed(R"(Used (\d+) registers)");
  static const std::regex kSmem(R"((\d+) bytes smem)");
  std::istringstream lines(log);
  std::string line;
  KernelResources* current = nullptr;
  while (std::getline(lines, line)) {
    std::smatch m;
    if (std::regex_search(line, m, kEntry)) {
      out.push_back(KernelResources{});
      current = &out.back();
      current->kernel = m[1];
      current->static_shared_bytes = 0;
      continue;
    }
    if (!current) continue;
    if (std::regex_search(line, m, kFrame)) {
      current->local_bytes = std::stoll(m[1]);
      current->spill_store_bytes = std::stoll(m[2]);
      current->spill_load_bytes = std::stoll(m[3]);
    }
    if (std::regex_search(line, m, kUsed)) {
      current->registers = std::stoi(m[1]);
      if (std::regex_search(line, m, kSmem)) current->static_shared_bytes = std::stoll(m[1]);
    }
  }
  return out;
}

namespace {

// The length of the valid UTF-8 sequence at the start of `s` (no overlong
// forms, no surrogates, nothing past U+10FFFF), or 0.
size_t Utf8Length(std::string_view s) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  unsigned char c = byte(0);
  size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
  if (n == 0 || c > 0xf4 || s.size() < n) return 0;
  for (size_t i = 1; i < n; ++i) {
    if ((byte(i) & 0xc0) != 0x80) return 0;
  }
  if (c == 0xe0 && byte(1) < 0xa0) return 0;   // overlong
  if (c == 0xed && byte(1) >= 0xa0) return 0;  // surrogate
  if (c == 0xf0 && byte(1) < 0x90) return 0;   // overlong
  if (c == 0xf4 && byte(1) >= 0x90) return 0;  // past U+10FFFF
  return n;
}

}  // namespace

std::string EscapeLog(std::string_view log) {
  std::string out;
  out.reserve(log.size());
  char escape[8];
  for (size_t i = 0; i < log.size();) {
    unsigned char c = static_cast<unsigned char>(log[i]);
    if (c == '\n' || c == '\t' || (c >= 0x20 && c < 0x7f)) {
      out.push_back(static_cast<char>(c));
      ++i;
      continue;
    }
    size_t n = c >= 0x80 ? Utf8Length(log.substr(i)) : 0;
    if (n == 2 && c == 0xc2 && static_cast<unsigned char>(log[i + 1]) < 0xa0) {
      // A C1 control (U+0080 … U+009F): some terminals act on it.
      std::snprintf(escape, sizeof(escape), "\\u%04x",
                    static_cast<unsigned>(static_cast<unsigned char>(log[i + 1])));
      out += escape;
    } else if (n > 0) {
      out.append(log.substr(i, n));
    } else {
      std::snprintf(escape, sizeof(escape), "\\x%02x", static_cast<unsigned>(c));
      out += escape;
      n = 1;
    }
    i += n;
  }
  return out;
}

Status CheckUntrustedCompiles(const CompilerOptions& options) {
  if (options.allow_unsandboxed) return Status::Ok();
  if (Status confinement = ConfinementAvailable(); !confinement.ok()) {
    return FailedPreconditionError(RefusalMessage(confinement));
  }
  return worker::LocateCompileHelper(options.helper_binary).status();
}

}  // namespace ksearch::internal
