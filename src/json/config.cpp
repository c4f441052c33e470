#include "uvcl/config.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>
#include <utility>

#include "files.hpp"
#include "json/json_util.hpp"

namespace uvcl {

namespace {

constexpr std::uint64_t kMaxConfigBytes = 1u << 20;

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

// The integer keys of "opencl" and their ranges: the parser and
// validate_config (a Config built in code) check the same ones.
struct UnsignedKey {
  std::string_view key;
  unsigned Config::*field;
  unsigned lo, hi;
};
constexpr UnsignedKey kUnsignedKeys[] = {
    {"window", &Config::window, 1, kMaxWindow},
    {"program_memo", &Config::program_memo, 0, kMaxProgramMemo},
    {"loop_budget_us", &Config::loop_budget_us, 0, kMaxLoopBudgetUs},
    {"cross_wait_us", &Config::cross_wait_us, 0, kMaxCrossWaitUs},
    {"cross_copy_chunk_mib", &Config::cross_copy_chunk_mib, 1, kMaxCrossCopyChunkMib},
    {"cross_copy_ring", &Config::cross_copy_ring, 1, kMaxCrossCopyRing},
    {"compilers", &Config::compilers, 1, kMaxCompilers},
    {"compile_timeout_ms", &Config::compile_timeout_ms, 1, kMaxCompileTimeoutMs},
    {"compiler_idle_ms", &Config::compiler_idle_ms, 0, kMaxCompilerIdleMs},
};
// The integer keys that also take "auto" (nullopt: chosen per device).
struct AutoKey {
  std::string_view key;
  std::optional<unsigned> Config::*field;
  unsigned lo, hi;
};
constexpr AutoKey kAutoKeys[] = {
    {"queues", &Config::queues, 1, kMaxQueues},
    {"spin_us", &Config::spin_us, 0, kMaxSpinUs},
    {"read_burst_us", &Config::read_burst_us, 0, kMaxReadBurstUs},
};


// The keys whose value is one of a few names.
template <class E>
using Names = std::pair<std::string_view, E>;
constexpr Names<CommandEvents> kCommandEventsNames[] = {
    {"auto", CommandEvents::Auto}, {"all", CommandEvents::All}, {"awaited", CommandEvents::Awaited}};
constexpr Names<CompletionMode> kCompletionNames[] = {
    {"auto", CompletionMode::Auto}, {"callback", CompletionMode::Callback}, {"poll", CompletionMode::Poll}};
constexpr Names<CompileMode> kCompileNames[] = {{"process", CompileMode::Process}, {"inline", CompileMode::Inline}};

// Reads one of `names` into `out`; anything else is an error listing them
// ("expected \"auto\", \"all\" or \"awaited\", got ...").
template <class E, std::size_t N>
Result<void> get_named(Reader& r, od::value& f, const Path& p, const Names<E> (&names)[N], E& out) {
  std::string what;
  for (std::size_t i = 0; i < N; ++i)
    what += (i == 0 ? "" : i + 1 == N ? " or " : ", ") + ("\"" + std::string(names[i].first) + "\"");
  std::string_view s;
  UVCL_TRY(r.get_string(f, p, s, what));
  for (const auto& [name, value] : names)
    if (s == name) {
      out = value;
      return {};
    }
  return r.expected(p, what, f);
}

Result<void> parse_opencl(Reader& r, od::value& v, const Path& at, Config& cfg) {
  od::object obj;
  UVCL_TRY(r.get_object(v, at, obj));
  auto field = [&](std::string_view key, od::value& f, const Path& p) -> Result<void> {
    if (key == "platform_ids") return parse_platform_ids(r, f, p, cfg);
    for (const UnsignedKey& k : kUnsignedKeys) {
      if (key != k.key) continue;
      std::uint64_t n = 0;
      UVCL_TRY(r.get_uint(f, p, k.lo, k.hi, n));
      cfg.*k.field = static_cast<unsigned>(n);
      return {};
    }
    for (const AutoKey& k : kAutoKeys) {
      if (key != k.key) continue;
      const std::string what = "an integer " + std::to_string(k.lo) + ".." + std::to_string(k.hi) + " or \"auto\"";
      if (Reader::lead(f) == '"') {
        std::string_view s;
        UVCL_TRY(r.get_string(f, p, s, what));
        if (s != "auto") return r.expected(p, what, f);
        (cfg.*k.field).reset();
        return {};
      }
      std::uint64_t n = 0;
      UVCL_TRY(r.get_uint(f, p, k.lo, k.hi, n, what));
      cfg.*k.field = static_cast<unsigned>(n);
      return {};
    }
    if (key == "command_events") return get_named(r, f, p, kCommandEventsNames, cfg.command_events);
    if (key == "completion") return get_named(r, f, p, kCompletionNames, cfg.completion);
    if (key == "compile") return get_named(r, f, p, kCompileNames, cfg.compile);
    if (key == "library" || key == "compiler" || key == "build_options") {
      std::string_view s;
      UVCL_TRY(r.get_string(f, p, s));
      (key == "library" ? cfg.library : key == "compiler" ? cfg.compiler : cfg.build_options) = s;
      return {};
    }
    if (key == "absorb_sigabrt") return r.get_bool(f, p, cfg.absorb_sigabrt);
    if (key == "profile") return r.get_bool(f, p, cfg.profile);
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
                                "program_memo", "spin_us", "loop_budget_us", "read_burst_us", "cross_wait_us", "cross_copy_chunk_mib", "cross_copy_ring",
                                "command_events", "completion", "compile", "compiler", "compilers", "compile_timeout_ms", "compiler_idle_ms", "build_options"},
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
  for (const UnsignedKey& k : kUnsignedKeys) {
    const unsigned v = config.*k.field;
    if (v < k.lo || v > k.hi)
      return Error{Status::InvalidConfig, "opencl." + std::string(k.key) + " (" + std::to_string(v) + ") is outside " +
                                              std::to_string(k.lo) + ".." + std::to_string(k.hi)};
  }
  for (const AutoKey& k : kAutoKeys) {
    const std::optional<unsigned> v = config.*k.field;
    if (v && (*v < k.lo || *v > k.hi))
      return Error{Status::InvalidConfig, "opencl." + std::string(k.key) + " (" + std::to_string(*v) + ") is outside " +
                                              std::to_string(k.lo) + ".." + std::to_string(k.hi)};
  }
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
  // A config is a few hundred bytes; the cap keeps a wrong path (a log, an
  // image) from being read whole.
  auto text = files::read_regular(path, kMaxConfigBytes, "the limit for a config file");
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
