#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>

#include <simdjson.h>

#include "../watchdog.hpp"
#include "uvcl/config.hpp"

namespace config_test {

using uvcl::Config;
using uvcl::Status;

// The message of a config that must fail as InvalidConfig.
std::string config_error(const std::string& json) {
  auto r = uvcl::parse_config(json, "cfg.json");
  if (r.ok()) return "<parsed>";
  EXPECT_EQ(r.status(), Status::InvalidConfig) << r.error().message;
  return r.error().message;
}

std::string temp_path(const std::string& name) { return testing::TempDir() + "uvcl_config_test_" + name; }

std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = temp_path(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// Sets or clears an environment variable for one test, restoring it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(Config, EmptyObjectGivesDefaults) {
  auto r = uvcl::parse_config("{}");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const Config d;
  EXPECT_EQ(r->platform_ids, d.platform_ids);
  EXPECT_EQ(r->queues, d.queues);
  EXPECT_EQ(r->window, d.window);
  EXPECT_EQ(r->library, d.library);
  EXPECT_EQ(r->absorb_sigabrt, d.absorb_sigabrt);
  EXPECT_EQ(r->cache_dir, d.cache_dir);
  EXPECT_EQ(r->profile, d.profile);
  EXPECT_EQ(r->program_memo, d.program_memo);
  EXPECT_FALSE(r->spin_us.has_value());  // "auto": GPUs spin briefly, CPU devices never
  EXPECT_EQ(r->command_events, uvcl::CommandEvents::Auto);
  EXPECT_EQ(r->debug_backends, d.debug_backends);
  EXPECT_EQ(r->debug_asm, d.debug_asm);
  EXPECT_FALSE(r->platform_ids.has_value());  // the contract: absent means all platforms
}

TEST(Config, EveryKeyIsRead) {
  auto r = uvcl::parse_config(R"({
    "opencl": {"platform_ids": [2, 0], "queues": 3, "window": 17, "library": "/opt/libOpenCL.so.1",
               "absorb_sigabrt": true, "cache_dir": "/tmp/cache", "profile": true,
               "program_memo": 9, "spin_us": 250, "command_events": "awaited"},
    "debug": {"backends": true, "asm": true}
  })");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->platform_ids, (std::vector<std::size_t>{2, 0}));
  EXPECT_EQ(r->queues, 3u);
  EXPECT_EQ(r->window, 17u);
  EXPECT_EQ(r->library, "/opt/libOpenCL.so.1");
  EXPECT_TRUE(r->absorb_sigabrt);
  EXPECT_EQ(r->cache_dir, "/tmp/cache");
  EXPECT_TRUE(r->profile);
  EXPECT_EQ(r->program_memo, 9u);
  EXPECT_EQ(r->spin_us, std::optional<unsigned>(250u));
  EXPECT_EQ(r->command_events, uvcl::CommandEvents::Awaited);
  EXPECT_TRUE(r->debug_backends);
  EXPECT_TRUE(r->debug_asm);
}

TEST(Config, PlatformIdsNullEmptyAndList) {
  auto null = uvcl::parse_config(R"({"opencl": {"platform_ids": null}})");
  ASSERT_TRUE(null.ok()) << null.error().message;
  EXPECT_FALSE(null->platform_ids.has_value());
  auto none = uvcl::parse_config(R"({"opencl": {"platform_ids": []}})");
  ASSERT_TRUE(none.ok()) << none.error().message;
  ASSERT_TRUE(none->platform_ids.has_value());
  EXPECT_TRUE(none->platform_ids->empty());
}

TEST(Config, CacheDirNullMeansNoCache) {
  auto r = uvcl::parse_config(R"({"opencl": {"cache_dir": null}})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->cache_dir.empty());
}

TEST(Config, UnescapesStrings) {
  auto r = uvcl::parse_config(R"({"opencl": {"library": "C:\\lib\u00e9\"x"}})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->library, "C:\\lib\xc3\xa9\"x");
}

TEST(Config, QueueAndWindowRangeEdges) {
  struct Edge {
    const char* key;
    long long lo, hi;
  };
  for (Edge e : {Edge{"queues", 1, 64}, Edge{"window", 1, 65536}, Edge{"program_memo", 0, 4096},
                 Edge{"spin_us", 0, 1000000}, Edge{"loop_budget_us", 0, 1000000}, Edge{"read_burst_us", 0, 1000000},
                 Edge{"cross_wait_us", 0, 1000000}, Edge{"cross_copy_chunk_mib", 1, 1024}, Edge{"cross_copy_ring", 1, 64}}) {
    const std::string key = e.key;
    auto doc = [&](long long v) { return R"({"opencl": {")" + key + "\": " + std::to_string(v) + "}}"; };
    const std::string expected = "an integer " + std::to_string(e.lo) + ".." + std::to_string(e.hi) +
                                 (key == "spin_us" || key == "queues" || key == "read_burst_us" ? " or \"auto\"" : "");
    for (long long ok : {e.lo, e.hi}) {
      auto r = uvcl::parse_config(doc(ok));
      ASSERT_TRUE(r.ok()) << r.error().message;
      const unsigned got = key == "queues"         ? r->queues.value_or(~0u)
                           : key == "window"       ? r->window
                           : key == "program_memo" ? r->program_memo
                           : key == "spin_us"      ? r->spin_us.value_or(~0u)
                           : key == "read_burst_us" ? r->read_burst_us.value_or(~0u)
                           : key == "cross_wait_us" ? r->cross_wait_us
                           : key == "cross_copy_chunk_mib" ? r->cross_copy_chunk_mib
                           : key == "cross_copy_ring" ? r->cross_copy_ring
                                                   : r->loop_budget_us;
      EXPECT_EQ(got, static_cast<unsigned>(ok));
    }
    for (long long bad : {e.lo - 1, e.hi + 1, -1LL})
      EXPECT_EQ(config_error(doc(bad)), "cfg.json: opencl." + key + ": expected " + expected + ", got " +
                                            std::to_string(bad));
  }
}

TEST(Config, SpinIsAnIntegerOrAuto) {
  auto r = uvcl::parse_config(R"({"opencl": {"spin_us": 5}})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  auto a = uvcl::parse_config(R"({"opencl": {"spin_us": "auto"}})");
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_FALSE(a->spin_us.has_value());
  EXPECT_EQ(config_error(R"({"opencl": {"spin_us": "fast"}})"),
            R"(cfg.json: opencl.spin_us: expected an integer 0..1000000 or "auto", got "fast")");
  EXPECT_EQ(config_error(R"({"opencl": {"spin_us": null}})"),
            R"(cfg.json: opencl.spin_us: expected an integer 0..1000000 or "auto", got null)");
  uvcl::Config c;
  c.spin_us = uvcl::kMaxSpinUs + 1;
  auto v = uvcl::validate_config(c);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.error().message, "opencl.spin_us (1000001) is outside 0..1000000");
}

TEST(Config, ReadBurstIsAnIntegerOrAuto) {
  auto a = uvcl::parse_config(R"({"opencl": {"read_burst_us": "auto"}})");
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_FALSE(a->read_burst_us.has_value());
  EXPECT_FALSE(uvcl::Config{}.read_burst_us.has_value()) << "the default is \"auto\"";
  EXPECT_EQ(config_error(R"({"opencl": {"read_burst_us": "often"}})"),
            R"(cfg.json: opencl.read_burst_us: expected an integer 0..1000000 or "auto", got "often")");
  uvcl::Config c;
  c.read_burst_us = uvcl::kMaxReadBurstUs + 1;
  auto v = uvcl::validate_config(c);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.error().message, "opencl.read_burst_us (1000001) is outside 0..1000000");
}

TEST(Config, QueuesAreAnIntegerOrAuto) {
  EXPECT_FALSE(Config{}.queues.has_value()) << "the default is \"auto\"";
  auto a = uvcl::parse_config(R"({"opencl": {"queues": "auto"}})");
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_FALSE(a->queues.has_value());
  EXPECT_EQ(config_error(R"({"opencl": {"queues": "many"}})"),
            R"(cfg.json: opencl.queues: expected an integer 1..64 or "auto", got "many")");
  uvcl::Config c;
  c.queues = 0;
  auto v = uvcl::validate_config(c);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.error().message, "opencl.queues (0) is outside 1..64");
}

TEST(Config, IntegersMustBeIntegers) {
  EXPECT_EQ(config_error(R"({"opencl": {"queues": "x"}})"), R"(cfg.json: opencl.queues: expected an integer 1..64 or "auto", got "x")");
  EXPECT_EQ(config_error(R"({"opencl": {"queues": 1.5}})"), "cfg.json: opencl.queues: expected an integer 1..64 or \"auto\", got 1.5");
  EXPECT_EQ(config_error(R"({"opencl": {"queues": 2.0}})"), "cfg.json: opencl.queues: expected an integer 1..64 or \"auto\", got 2.0");
  EXPECT_EQ(config_error(R"({"opencl": {"queues": 1e1}})"), "cfg.json: opencl.queues: expected an integer 1..64 or \"auto\", got 1e1");
  EXPECT_EQ(config_error(R"({"opencl": {"window": true}})"), "cfg.json: opencl.window: expected an integer 1..65536, got true");
  EXPECT_EQ(config_error(R"({"opencl": {"window": null}})"), "cfg.json: opencl.window: expected an integer 1..65536, got null");
  EXPECT_EQ(config_error(R"({"opencl": {"window": [8]}})"), "cfg.json: opencl.window: expected an integer 1..65536, got an array");
  EXPECT_EQ(config_error(R"({"opencl": {"window": {}}})"), "cfg.json: opencl.window: expected an integer 1..65536, got an object");
  // Past 64 bits, and past a double: still a number, still out of range.
  EXPECT_EQ(config_error(R"({"opencl": {"queues": 123456789012345678901234567890}})"),
            "cfg.json: opencl.queues: expected an integer 1..64 or \"auto\", got 123456789012345678901234567890");
  EXPECT_EQ(config_error(R"({"opencl": {"queues": 1e400}})"), "cfg.json: opencl.queues: expected an integer 1..64 or \"auto\", got 1e400");
}

TEST(Config, WrongTypes) {
  EXPECT_EQ(config_error(R"({"opencl": 1})"), "cfg.json: opencl: expected an object, got 1");
  EXPECT_EQ(config_error(R"({"debug": []})"), "cfg.json: debug: expected an object, got an array");
  EXPECT_EQ(config_error(R"({"opencl": {"library": 5}})"), "cfg.json: opencl.library: expected a string, got 5");
  EXPECT_EQ(config_error(R"({"opencl": {"library": null}})"), "cfg.json: opencl.library: expected a string, got null");
  EXPECT_EQ(config_error(R"({"opencl": {"absorb_sigabrt": "yes"}})"),
            R"(cfg.json: opencl.absorb_sigabrt: expected true or false, got "yes")");
  EXPECT_EQ(config_error(R"({"opencl": {"cache_dir": false}})"),
            "cfg.json: opencl.cache_dir: expected null or a directory path, got false");
  EXPECT_EQ(config_error(R"({"opencl": {"profile": 0}})"), "cfg.json: opencl.profile: expected true or false, got 0");
  EXPECT_EQ(config_error(R"({"debug": {"backends": 1}})"), "cfg.json: debug.backends: expected true or false, got 1");
  EXPECT_EQ(config_error(R"({"debug": {"asm": null}})"), "cfg.json: debug.asm: expected true or false, got null");
}

TEST(Config, PlatformIdErrors) {
  EXPECT_EQ(config_error(R"({"opencl": {"platform_ids": 0}})"),
            "cfg.json: opencl.platform_ids: expected null or an array of non-negative integers, got 0");
  EXPECT_EQ(config_error(R"({"opencl": {"platform_ids": "all"}})"),
            R"(cfg.json: opencl.platform_ids: expected null or an array of non-negative integers, got "all")");
  EXPECT_EQ(config_error(R"({"opencl": {"platform_ids": [0, -1]}})"),
            "cfg.json: opencl.platform_ids[1]: expected a non-negative integer, got -1");
  EXPECT_EQ(config_error(R"({"opencl": {"platform_ids": [0.5]}})"),
            "cfg.json: opencl.platform_ids[0]: expected a non-negative integer, got 0.5");
  EXPECT_EQ(config_error(R"({"opencl": {"platform_ids": [[0]]}})"),
            "cfg.json: opencl.platform_ids[0]: expected a non-negative integer, got an array");
  EXPECT_EQ(config_error(R"({"opencl": {"platform_ids": [1, 2, 1]}})"),
            "cfg.json: opencl.platform_ids[2]: duplicate platform id 1");
}

TEST(Config, UnknownKeysNameTheAllowedOnes) {
  EXPECT_EQ(config_error(R"({"opencl": {}, "debgu": {}})"), "cfg.json: debgu: unknown key (expected one of: opencl, debug)");
  EXPECT_EQ(config_error(R"({"opencl": {"queue": 4}})"),
            "cfg.json: opencl.queue: unknown key (expected one of: platform_ids, queues, window, library, "
            "absorb_sigabrt, cache_dir, profile, program_memo, spin_us, loop_budget_us, read_burst_us, "
            "cross_wait_us, cross_copy_chunk_mib, cross_copy_ring, command_events, completion, compile, compiler, compilers, compile_timeout_ms, compiler_idle_ms, build_options)");
  EXPECT_EQ(config_error(R"({"debug": {"verbose": true}})"),
            "cfg.json: debug.verbose: unknown key (expected one of: backends, asm)");
  // Keys that are not plain identifiers are quoted in the path.
  EXPECT_EQ(config_error(R"({"a b\"c": 1})"), R"(cfg.json: ["a b\"c"]: unknown key (expected one of: opencl, debug))");
}

TEST(Config, DuplicateKeys) {
  EXPECT_EQ(config_error(R"({"opencl": {"queues": 1, "queues": 2}})"), "cfg.json: opencl.queues: duplicate key");
  EXPECT_EQ(config_error(R"({"debug": {}, "debug": {}})"), "cfg.json: debug: duplicate key");
}

TEST(Config, TopLevelMustBeAnObject) {
  EXPECT_EQ(config_error("[]"), "cfg.json: expected a JSON object at the top level, got an array");
  EXPECT_EQ(config_error("  8 "), "cfg.json: expected a JSON object at the top level, got 8");
  EXPECT_EQ(config_error(R"("opencl")"), R"(cfg.json: expected a JSON object at the top level, got "opencl")");
  EXPECT_EQ(config_error("null"), "cfg.json: expected a JSON object at the top level, got null");
}

TEST(Config, LongValuesAreCutInMessages) {
  const std::string long_name(200, 'q');
  // Every key whose string values are named ones: the value given is cut.
  for (const char* key : {"queues", "spin_us", "command_events", "completion", "compile"}) {
    const std::string msg = config_error(R"({"opencl": {")" + std::string(key) + R"(": ")" + long_name + "\"}}");
    EXPECT_EQ(msg.rfind("cfg.json: opencl." + std::string(key) + ": expected ", 0), 0u) << msg;
    EXPECT_NE(msg.find(", got \"qqq"), std::string::npos) << msg;
    EXPECT_EQ(msg.substr(msg.size() - 3), "...") << msg;
    EXPECT_LT(msg.size(), 140u) << msg;
  }
}

// Malformed JSON: the message says where, as a byte offset.
std::string at_byte(std::size_t offset) { return "cfg.json: malformed JSON at byte " + std::to_string(offset) + " "; }

TEST(Config, MalformedJsonReportsWhere) {
  struct Case {
    std::string json;
    std::size_t offset;
  };
  const std::string comma = R"({"opencl": {"queues": 1,, "window": 2}})";
  const std::string colon = R"({"opencl" {}})";
  const std::string atom = R"({"debug": {"asm": tru}})";
  const std::string number = R"({"opencl": {"queues": 01}})";
  const std::string stray = R"({"opencl": {"platform_ids": [1,]}})";
  const std::string truncated = R"({"opencl": {"queues": 1})";
  const std::string trailing = R"({"opencl": {}} {})";
  const std::string unclosed = R"({"opencl": {"library": "abc}})";
  const std::string control = "{\"opencl\": {\"library\": \"a\tb\"}}";
  const std::string utf8 = "{\"opencl\": {\"library\": \"a\xff\"}}";
  const std::string escape = R"({"opencl": {"library": "\q"}})";
  for (const Case& c : {Case{comma, comma.find(",,") + 1}, Case{colon, colon.find('{', 1)},
                        Case{atom, atom.find("tru")}, Case{number, number.find("01")},
                        Case{stray, stray.find(']')}, Case{truncated, truncated.size()},
                        Case{trailing, trailing.rfind('{')}, Case{unclosed, unclosed.rfind('"')},
                        Case{control, control.find('\t')}, Case{utf8, utf8.find('\xff')},
                        Case{escape, escape.find("\"\\q")}}) {
    const std::string msg = config_error(c.json);
    EXPECT_EQ(msg.rfind(at_byte(c.offset), 0), 0u) << c.json << "\n" << msg;
  }
}

TEST(Config, MalformedJsonCarriesSimdjsonsMessageAndLine) {
  const std::string json = "{\n  \"opencl\": {\n    \"queues\": 3,,\n  }\n}";
  const std::size_t offset = json.find(",,") + 1;
  const std::size_t line_start = json.rfind('\n', offset) + 1;
  const std::string where = "(line 3, column " + std::to_string(offset - line_start + 1) + "): ";
  const std::string msg = config_error(json);
  EXPECT_EQ(msg, at_byte(offset) + where + simdjson::error_message(simdjson::TAPE_ERROR)) << msg;
}

TEST(Config, EmptyDocument) {
  EXPECT_EQ(config_error("").rfind("cfg.json: malformed JSON: ", 0), 0u);
  EXPECT_EQ(config_error(" \n ").rfind("cfg.json: malformed JSON: ", 0), 0u);
}

TEST(Config, OriginPrefixesMessages) {
  auto r = uvcl::parse_config(R"({"x": 1})", "/etc/uvcl.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message.rfind("/etc/uvcl.json: x: unknown key", 0), 0u) << r.error().message;
}

TEST(ConfigFile, LoadsAFile) {
  const std::string path = write_file("ok.json", R"({"opencl": {"queues": 5}})");
  auto r = uvcl::load_config_file(path);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->queues, 5u);
}

TEST(ConfigFile, ErrorsNameTheFile) {
  const std::string path = write_file("bad.json", R"({"opencl": {"queues": 0}})");
  auto r = uvcl::load_config_file(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status(), Status::InvalidConfig);
  EXPECT_EQ(r.error().message, path + ": opencl.queues: expected an integer 1..64 or \"auto\", got 0");
}

TEST(ConfigFile, UnreadableIsAnIoErrorNamingThePath) {
  const std::string missing = temp_path("does-not-exist.json");
  std::remove(missing.c_str());
  auto r = uvcl::load_config_file(missing);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status(), Status::Io);
  EXPECT_EQ(r.error().message.rfind(missing + ": cannot read: ", 0), 0u) << r.error().message;

  auto dir = uvcl::load_config_file(testing::TempDir());
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.status(), Status::Io) << dir.error().message;
}

// A FIFO blocked load_config_file in open() until a writer came; a device
// (/dev/zero) was read without end. Both are refused before any byte is
// read, naming the path and what it is; a regular file over 1 MiB too.
TEST(ConfigFile, OnlyRegularFilesOfBoundedSizeAreRead) {
  uvcl::testing::Watchdog wd("config FIFO", 30);
  const std::string fifo = temp_path("config-fifo");
  std::remove(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto r = uvcl::load_config_file(fifo);
  std::remove(fifo.c_str());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status(), Status::Io);
  EXPECT_EQ(r.error().message, fifo + ": cannot read: not a regular file (a FIFO)");

  r = uvcl::load_config_file("/dev/zero");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "/dev/zero: cannot read: not a regular file (a character device)");

  const std::string big = write_file("big.json", "{" + std::string(2u << 20, ' ') + "}");
  r = uvcl::load_config_file(big);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, big + ": larger than 1048576 bytes (the limit for a config file)");
}

TEST(LoadConfig, ExplicitPathWinsOverTheEnvironment) {
  const std::string env_file = write_file("env.json", R"({"opencl": {"queues": 2}})");
  const std::string arg_file = write_file("arg.json", R"({"opencl": {"queues": 7}})");
  ScopedEnv env("UVCL_CONFIG", env_file.c_str());
  auto r = uvcl::load_config(arg_file);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->queues, 7u);
}

TEST(LoadConfig, EnvironmentIsUsedWithoutAPath) {
  const std::string env_file = write_file("env2.json", R"({"opencl": {"queues": 2}})");
  ScopedEnv env("UVCL_CONFIG", env_file.c_str());
  auto r = uvcl::load_config("");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->queues, 2u);
}

TEST(LoadConfig, EnvironmentErrorsSayWhereThePathCameFrom) {
  const std::string missing = temp_path("env-missing.json");
  std::remove(missing.c_str());
  ScopedEnv env("UVCL_CONFIG", missing.c_str());
  auto r = uvcl::load_config("");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status(), Status::Io);
  EXPECT_EQ(r.error().message.rfind("UVCL_CONFIG: " + missing + ": cannot read: ", 0), 0u) << r.error().message;
}

TEST(LoadConfig, DefaultsWithoutPathOrEnvironment) {
  for (const char* value : {static_cast<const char*>(nullptr), ""}) {
    ScopedEnv env("UVCL_CONFIG", value);
    auto r = uvcl::load_config("");
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->queues, Config{}.queues);
    EXPECT_EQ(r->window, Config{}.window);
  }
}

// A key whose value is one of a few names: each name reads as its value,
// anything else is an error listing them.
template <class E>
void expect_named_values(const std::string& key, std::initializer_list<std::pair<const char*, E>> names,
                         E Config::*field, const std::string& listed) {
  for (auto [text, want] : names) {
    auto r = uvcl::parse_config(R"({"opencl": {")" + key + R"(": ")" + text + "\"}}");
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ((*r).*field, want) << key << " " << text;
  }
  EXPECT_EQ(config_error(R"({"opencl": {")" + key + R"(": "some"}})"),
            "cfg.json: opencl." + key + ": expected " + listed + R"(, got "some")");
  EXPECT_EQ(config_error(R"({"opencl": {")" + key + R"(": 1}})"),
            "cfg.json: opencl." + key + ": expected " + listed + ", got 1");
}

TEST(Config, CommandEventsNamesItsValues) {
  expect_named_values<uvcl::CommandEvents>("command_events",
                                           {{"auto", uvcl::CommandEvents::Auto},
                                            {"all", uvcl::CommandEvents::All},
                                            {"awaited", uvcl::CommandEvents::Awaited}},
                                           &Config::command_events, R"("auto", "all" or "awaited")");
}

TEST(Config, CompletionNamesItsValues) {
  EXPECT_EQ(Config{}.completion, uvcl::CompletionMode::Auto);
  expect_named_values<uvcl::CompletionMode>("completion",
                                            {{"auto", uvcl::CompletionMode::Auto},
                                             {"callback", uvcl::CompletionMode::Callback},
                                             {"poll", uvcl::CompletionMode::Poll}},
                                            &Config::completion, R"("auto", "callback" or "poll")");
}

TEST(Config, CompilerKeysAreReadWithTheirDefaults) {
  const Config d;
  EXPECT_EQ(d.compile, uvcl::CompileMode::Process);
  EXPECT_EQ(d.compiler, "");
  EXPECT_EQ(d.compilers, 1u);
  EXPECT_EQ(d.compile_timeout_ms, 60000u);
  EXPECT_EQ(d.compiler_idle_ms, 10000u);
  EXPECT_EQ(d.build_options, "-cl-finite-math-only -cl-no-signed-zeros -cl-mad-enable");
  auto r = uvcl::parse_config(R"({"opencl": {"compile": "inline", "compiler": "/opt/uvcl-compiler", "compilers": 3,
                                  "compile_timeout_ms": 250, "compiler_idle_ms": 0, "build_options": ""}})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->compile, uvcl::CompileMode::Inline);
  EXPECT_EQ(r->compiler, "/opt/uvcl-compiler");
  EXPECT_EQ(r->compilers, 3u);
  EXPECT_EQ(r->compile_timeout_ms, 250u);
  EXPECT_EQ(r->compiler_idle_ms, 0u);
  EXPECT_EQ(r->build_options, "");
  auto p = uvcl::parse_config(R"({"opencl": {"compile": "process"}})");
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->compile, uvcl::CompileMode::Process);
}

TEST(Config, CompilerKeyErrorsNameKeyAndValue) {
  EXPECT_EQ(config_error(R"({"opencl": {"compile": "thread"}})"),
            R"(cfg.json: opencl.compile: expected "process" or "inline", got "thread")");
  EXPECT_EQ(config_error(R"({"opencl": {"compile": true}})"),
            R"(cfg.json: opencl.compile: expected "process" or "inline", got true)");
  EXPECT_EQ(config_error(R"({"opencl": {"compiler": 1}})"), "cfg.json: opencl.compiler: expected a string, got 1");
  EXPECT_EQ(config_error(R"({"opencl": {"build_options": null}})"),
            "cfg.json: opencl.build_options: expected a string, got null");
  EXPECT_EQ(config_error(R"({"opencl": {"compilers": 0}})"),
            "cfg.json: opencl.compilers: expected an integer 1..64, got 0");
  EXPECT_EQ(config_error(R"({"opencl": {"compilers": 65}})"),
            "cfg.json: opencl.compilers: expected an integer 1..64, got 65");
  EXPECT_EQ(config_error(R"({"opencl": {"compile_timeout_ms": 0}})"),
            "cfg.json: opencl.compile_timeout_ms: expected an integer 1..86400000, got 0");
  EXPECT_EQ(config_error(R"({"opencl": {"compile_timeout_ms": 86400001}})"),
            "cfg.json: opencl.compile_timeout_ms: expected an integer 1..86400000, got 86400001");
  EXPECT_EQ(config_error(R"({"opencl": {"compile_timeout_ms": 1.5}})"),
            "cfg.json: opencl.compile_timeout_ms: expected an integer 1..86400000, got 1.5");
  EXPECT_EQ(config_error(R"({"opencl": {"compiler_idle_ms": -1}})"),
            "cfg.json: opencl.compiler_idle_ms: expected an integer 0..86400000, got -1");
  EXPECT_EQ(config_error(R"({"opencl": {"compiler_idle_ms": "1s"}})"),
            R"(cfg.json: opencl.compiler_idle_ms: expected an integer 0..86400000, got "1s")");
}

TEST(Config, ValidateChecksTheCompilerRanges) {
  Config c;
  c.compilers = 0;
  auto r = uvcl::validate_config(c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "opencl.compilers (0) is outside 1..64");
  c = Config{};
  c.compile_timeout_ms = 0;
  r = uvcl::validate_config(c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "opencl.compile_timeout_ms (0) is outside 1..86400000");
  c = Config{};
  c.compiler_idle_ms = 86400001;
  r = uvcl::validate_config(c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "opencl.compiler_idle_ms (86400001) is outside 0..86400000");
}

TEST(Config, ValidateChecksTheCrossCopyRanges) {
  Config c;
  c.cross_copy_chunk_mib = 0;
  auto r = uvcl::validate_config(c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "opencl.cross_copy_chunk_mib (0) is outside 1..1024");
  c = Config{};
  c.cross_copy_ring = 65;
  r = uvcl::validate_config(c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "opencl.cross_copy_ring (65) is outside 1..64");
}

}  // namespace config_test
