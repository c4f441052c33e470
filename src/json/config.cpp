#include "uvcl/config.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>

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
    if (key == "library") {
      std::string_view s;
      UVCL_TRY(r.get_string(f, p, s));
      cfg.library = s;
      return {};
    }
    if (key == "absorb_sigabrt") return r.get_bool(f, p, cfg.absorb_sigabrt);
    if (key == "profile") return r.get_bool(f, p, cfg.profile);
    if (key == "program_memo" || key == "spin_us" || key == "loop_budget_us") {
      unsigned& field = key == "program_memo" ? cfg.program_memo : key == "spin_us" ? cfg.spin_us : cfg.loop_budget_us;
      const std::uint64_t hi = key == "program_memo" ? kMaxProgramMemo : key == "spin_us" ? kMaxSpinUs : kMaxLoopBudgetUs;
      std::uint64_t n = 0;
      UVCL_TRY(r.get_uint(f, p, 0, hi, n));
      field = static_cast<unsigned>(n);
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
                                "program_memo", "spin_us", "loop_budget_us", "command_events"}, field);
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
                          {"opencl.loop_budget_us", config.loop_budget_us, 0, kMaxLoopBudgetUs}};
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
