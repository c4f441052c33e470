#include "uvcl/config.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>

#include "json/json_util.hpp"

namespace uvcl {

namespace {

using json::Path;
using json::Reader;
namespace od = json::od;

Result<void> parse_platform_ids(Reader& r, od::value& v, const Path& at, Config& cfg) {
  constexpr std::string_view what = "null or an array of non-negative integers";
  auto null = r.is_null(v);
  if (!null) return std::move(null).error();
  if (*null) {
    cfg.platform_ids.reset();
    return {};
  }
  od::array arr;
  UVCL_TRY(r.get_array(v, at, arr, what));
  std::vector<std::size_t> ids;
  auto element = [&](std::size_t, od::value& e, const Path& p) -> Result<void> {
    std::uint64_t id = 0;
    UVCL_TRY(r.get_uint(e, p, 0, std::numeric_limits<std::size_t>::max(), id, "a non-negative integer"));
    // A platform listed twice would get two sets of devices for one context.
    if (std::find(ids.begin(), ids.end(), id) != ids.end())
      return r.fail(p, "duplicate platform id " + std::to_string(id));
    ids.push_back(static_cast<std::size_t>(id));
    return {};
  };
  UVCL_TRY(r.elements(arr, at, element));
  cfg.platform_ids = std::move(ids);
  return {};
}

Result<void> parse_opencl(Reader& r, od::value& v, const Path& at, Config& cfg) {
  od::object obj;
  UVCL_TRY(r.get_object(v, at, obj));
  auto field = [&](std::string_view key, od::value& f, const Path& p) -> Result<void> {
    if (key == "platform_ids") return parse_platform_ids(r, f, p, cfg);
    if (key == "queues" || key == "window") {
      const std::uint64_t hi = key == "queues" ? kMaxQueues : kMaxWindow;
      std::uint64_t n = 0;
      UVCL_TRY(r.get_uint(f, p, 1, hi, n));
      (key == "queues" ? cfg.queues : cfg.window) = static_cast<unsigned>(n);
      return {};
    }
    if (key == "command_events") {
      std::string_view s;
      UVCL_TRY(r.get_string(f, p, s, "\"auto\", \"all\" or \"awaited\""));
      if (s == "auto") cfg.command_events = CommandEvents::Auto;
      else if (s == "all") cfg.command_events = CommandEvents::All;
      else if (s == "awaited") cfg.command_events = CommandEvents::Awaited;
      else return r.fail(p, "expected \"auto\", \"all\" or \"awaited\", got \"" + std::string(s) + "\"");
      return {};
    }
    if (key == "compile") {
      std::string_view s;
      UVCL_TRY(r.get_string(f, p, s, "\"process\" or \"inline\""));
      if (s == "process") cfg.compile = CompileMode::Process;
      else if (s == "inline") cfg.compile = CompileMode::Inline;
      else return r.fail(p, "expected \"process\" or \"inline\", got \"" + std::string(s) + "\"");
      return {};
    }
    if (key == "library" || key == "compiler" || key == "build_options") {
      std::string_view s;
      UVCL_TRY(r.get_string(f, p, s));
      (key == "library" ? cfg.library : key == "compiler" ? cfg.compiler : cfg.build_options) = s;
      return {};
    }
    if (key == "absorb_sigabrt") return r.get_bool(f, p, cfg.absorb_sigabrt);
    if (key == "profile") return r.get_bool(f, p, cfg.profile);
    if (key == "program_memo" || key == "spin_us" || key == "compiler_idle_ms") {
      const std::uint64_t hi = key == "program_memo" ? kMaxProgramMemo
                               : key == "spin_us"    ? kMaxSpinUs
                                                     : kMaxCompilerIdleMs;
      std::uint64_t n = 0;
      UVCL_TRY(r.get_uint(f, p, 0, hi, n));
      (key == "program_memo" ? cfg.program_memo : key == "spin_us" ? cfg.spin_us : cfg.compiler_idle_ms) =
          static_cast<unsigned>(n);
      return {};
    }
    if (key == "compilers" || key == "compile_timeout_ms") {
      const std::uint64_t hi = key == "compilers" ? kMaxCompilers : kMaxCompileTimeoutMs;
      std::uint64_t n = 0;
      UVCL_TRY(r.get_uint(f, p, 1, hi, n));
      (key == "compilers" ? cfg.compilers : cfg.compile_timeout_ms) = static_cast<unsigned>(n);
      return {};
    }
    // key == "cache_dir": fields() admits no other key.
    auto null = r.is_null(f);
    if (!null) return std::move(null).error();
    if (*null) {
      cfg.cache_dir.clear();
      return {};
    }
    std::string_view s;
    UVCL_TRY(r.get_string(f, p, s, "null or a directory path"));
    cfg.cache_dir = s;
    return {};
  };
  return r.fields(obj, at, {"platform_ids", "queues", "window", "library", "absorb_sigabrt", "cache_dir", "profile",
                                "program_memo", "spin_us", "command_events", "compile", "compiler", "compilers",
                                "compile_timeout_ms", "compiler_idle_ms", "build_options"},
                  field);
}

Result<void> parse_debug(Reader& r, od::value& v, const Path& at, Config& cfg) {
  od::object obj;
  UVCL_TRY(r.get_object(v, at, obj));
  auto field = [&](std::string_view key, od::value& f, const Path& p) -> Result<void> {
    return r.get_bool(f, p, key == "backends" ? cfg.debug_backends : cfg.debug_asm);
  };
  return r.fields(obj, at, {"backends", "asm"}, field);
}

}  // namespace

Result<void> validate_config(const Config& config) {
  struct Range {
    const char* key;
    unsigned value, lo, hi;
  };
  const Range ranges[] = {{"opencl.queues", config.queues, 1, kMaxQueues},
                          {"opencl.window", config.window, 1, kMaxWindow},
                          {"opencl.program_memo", config.program_memo, 0, kMaxProgramMemo},
                          {"opencl.spin_us", config.spin_us, 0, kMaxSpinUs},
                          {"opencl.compilers", config.compilers, 1, kMaxCompilers},
                          {"opencl.compile_timeout_ms", config.compile_timeout_ms, 1, kMaxCompileTimeoutMs},
                          {"opencl.compiler_idle_ms", config.compiler_idle_ms, 0, kMaxCompilerIdleMs}};
  for (const Range& r : ranges)
    if (r.value < r.lo || r.value > r.hi)
      return Error{Status::InvalidConfig, std::string(r.key) + " (" + std::to_string(r.value) + ") is outside " +
                                              std::to_string(r.lo) + ".." + std::to_string(r.hi)};
  return {};
}

Result<Config> parse_config(std::string_view json, std::string_view origin) {
  Reader r(origin, Status::InvalidConfig);
  auto root = r.open(json);
  if (!root) return std::move(root).error();
  Config cfg;
  auto field = [&](std::string_view key, od::value& v, const Path& p) -> Result<void> {
    return key == "opencl" ? parse_opencl(r, v, p, cfg) : parse_debug(r, v, p, cfg);
  };
  UVCL_TRY(r.fields(*root, Path(), {"opencl", "debug"}, field));
  UVCL_TRY(r.finish());
  return cfg;
}

Result<Config> load_config_file(const std::string& path) {
  auto text = json::read_file(path);
  if (!text) return std::move(text).error();
  return parse_config(*text, path);
}

Result<Config> load_config(const std::string& path_or_empty) {
  if (!path_or_empty.empty()) return load_config_file(path_or_empty);
  const char* env = std::getenv("UVCL_CONFIG");
  // Say where the path came from: a stale variable is easy to forget.
  if (env != nullptr && *env != '\0') return load_config_file(env).context("UVCL_CONFIG");
  return Config{};
}

}  // namespace uvcl
