// bench_util.hpp — the benchmark harness's plumbing: a small JSON tree,
// statistics, clocks, RSS and CPU time, and errors that end one figure.
#pragma once

#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <uv.h>

#include "json/text.hpp"

namespace bench {

// A figure that cannot go on throws this; main records it and continues.
struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};
[[noreturn]] inline void fail(const std::string& what) { throw Failure(what); }

inline std::uint64_t now_ns() { return uv_hrtime(); }
inline double us_since(std::uint64_t t0) { return static_cast<double>(uv_hrtime() - t0) / 1e3; }

// --- JSON -----------------------------------------------------------------

class Json {
 public:
  enum class Type { Null, Bool, Number, String, Array, Object };

  Json() = default;
  Json(bool b) : type_(Type::Bool), bool_(b) {}  // NOLINT: implicit by design
  Json(double d) : type_(Type::Number), num_(d) {}  // NOLINT
  Json(int v) : Json(static_cast<double>(v)) {}  // NOLINT
  Json(long v) : Json(static_cast<double>(v)) {}  // NOLINT
  Json(long long v) : Json(static_cast<double>(v)) {}  // NOLINT
  Json(unsigned v) : Json(static_cast<double>(v)) {}  // NOLINT
  Json(unsigned long v) : Json(static_cast<double>(v)) {}  // NOLINT
  Json(unsigned long long v) : Json(static_cast<double>(v)) {}  // NOLINT
  Json(std::string s) : type_(Type::String), str_(std::move(s)) {}  // NOLINT
  Json(const char* s) : type_(Type::String), str_(s) {}  // NOLINT

  static Json array() {
    Json j;
    j.type_ = Type::Array;
    return j;
  }
  static Json object() {
    Json j;
    j.type_ = Type::Object;
    return j;
  }
  template <class T>
  static Json array_of(const std::vector<T>& v) {
    Json j = array();
    for (const T& x : v) j.push(Json(x));
    return j;
  }

  // Object member, created (null) when missing; a null becomes an object.
  Json& operator[](const std::string& key) {
    if (type_ == Type::Null) type_ = Type::Object;
    for (auto& [k, v] : members_)
      if (k == key) return v;
    members_.emplace_back(key, Json());
    return members_.back().second;
  }
  const Json* find(const std::string& key) const {
    for (const auto& [k, v] : members_)
      if (k == key) return &v;
    return nullptr;
  }
  void push(Json v) {
    if (type_ == Type::Null) type_ = Type::Array;
    items_.push_back(std::move(v));
  }
  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::Null; }
  Json& back() { return items_.back(); }
  const std::vector<Json>& items() const { return items_; }
  const std::vector<std::pair<std::string, Json>>& members() const { return members_; }
  double number() const { return type_ == Type::Number ? num_ : NAN; }
  const std::string& str() const { return str_; }

  std::string dump() const {
    std::string out;
    write(out, 0);
    out += '\n';
    return out;
  }

 private:
  void write(std::string& out, int indent) const {
    const std::string pad(static_cast<std::size_t>(indent) + 2, ' ');
    switch (type_) {
      case Type::Null: out += "null"; break;
      case Type::Bool: out += bool_ ? "true" : "false"; break;
      case Type::Number: {
        if (!std::isfinite(num_)) {
          out += "null";
          break;
        }
        char buf[40];
        if (num_ == std::floor(num_) && std::fabs(num_) < 9e15) std::snprintf(buf, sizeof buf, "%.0f", num_);
        else std::snprintf(buf, sizeof buf, "%.6g", num_);
        out += buf;
        break;
      }
      case Type::String: uvcl::json::append_string(out, str_); break;
      case Type::Array: {
        // Arrays of numbers stay on one line: sample lists are long.
        bool flat = std::all_of(items_.begin(), items_.end(),
                                [](const Json& j) { return j.type_ != Type::Array && j.type_ != Type::Object; });
        out += '[';
        for (std::size_t i = 0; i < items_.size(); ++i) {
          if (i) out += ',';
          if (!flat) out += "\n" + pad;
          items_[i].write(out, indent + 2);
        }
        if (!flat && !items_.empty()) out += "\n" + std::string(static_cast<std::size_t>(indent), ' ');
        out += ']';
        break;
      }
      case Type::Object: {
        out += '{';
        for (std::size_t i = 0; i < members_.size(); ++i) {
          out += i ? ",\n" : "\n";
          out += pad;
          uvcl::json::append_string(out, members_[i].first);
          out += ": ";
          members_[i].second.write(out, indent + 2);
        }
        if (!members_.empty()) out += "\n" + std::string(static_cast<std::size_t>(indent), ' ');
        out += '}';
        break;
      }
    }
  }

  Type type_ = Type::Null;
  bool bool_ = false;
  double num_ = 0;
  std::string str_;
  std::vector<Json> items_;
  std::vector<std::pair<std::string, Json>> members_;
};

// --- statistics -----------------------------------------------------------

inline double percentile(std::vector<double> v, double p) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const double pos = p / 100.0 * static_cast<double>(v.size() - 1);
  const std::size_t lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return v[lo] * (1 - frac) + v[hi] * frac;
}
inline double median(const std::vector<double>& v) { return percentile(v, 50); }
inline double min_of(const std::vector<double>& v) {
  return v.empty() ? NAN : *std::min_element(v.begin(), v.end());
}
inline double max_of(const std::vector<double>& v) {
  return v.empty() ? NAN : *std::max_element(v.begin(), v.end());
}
inline double mean_of(const std::vector<double>& v) {
  if (v.empty()) return NAN;
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

// p50/p90/p99/max/mean/min of a sample list.
inline Json summary(const std::vector<double>& v) {
  Json j = Json::object();
  j["n"] = v.size();
  j["p50"] = percentile(v, 50);
  j["p90"] = percentile(v, 90);
  j["p99"] = percentile(v, 99);
  j["max"] = max_of(v);
  j["min"] = min_of(v);
  j["mean"] = mean_of(v);
  return j;
}

// Every `step`-th sample, for plots (keeps JSON files small).
inline Json thinned(const std::vector<double>& v, std::size_t max_points) {
  Json j = Json::array();
  const std::size_t step = v.size() > max_points ? (v.size() + max_points - 1) / max_points : 1;
  for (std::size_t i = 0; i < v.size(); i += step) j.push(std::round(v[i] * 100) / 100);
  return j;
}

// --- process measurements ----------------------------------------------------

inline std::uint64_t rss_bytes() {
  std::ifstream f("/proc/self/statm");
  std::uint64_t size = 0, resident = 0;
  f >> size >> resident;
  return resident * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

// CPU seconds (user + system) of the process (RUSAGE_SELF) or of the calling
// thread (RUSAGE_THREAD). clock_gettime's CPU clocks, not getrusage: these
// have nanosecond resolution, getrusage's thread times move in scheduler
// ticks (4 ms here).
inline double cpu_seconds(int who = RUSAGE_SELF) {
  timespec ts{};
  ::clock_gettime(who == RUSAGE_THREAD ? CLOCK_THREAD_CPUTIME_ID : CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

}  // namespace bench
