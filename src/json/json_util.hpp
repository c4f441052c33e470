// json_util.hpp — what config and job parsing share: key paths, a strict
// reader over simdjson On-Demand, value text for messages. Files are read
// with files::read_regular (files.hpp).
//
// Every error a Reader makes reads "<origin>: <path>: <what>", e.g.
// `cfg.json: opencl.window: expected an integer 1..65536, got "x"`, or for broken
// JSON "<origin>: malformed JSON at byte N (line L, column C): <simdjson's
// message>". No exceptions: simdjson is used through error codes only.
#pragma once

#include <simdjson.h>

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>

#include "json/text.hpp"  // quote(): names in messages
#include "uvcl/status.hpp"

namespace uvcl::json {

namespace od = simdjson::ondemand;

// The byte offset in `s` of a first-stage (scan) error simdjson reports
// without a position (bad UTF-8, a control character or an unclosed string).
std::optional<std::size_t> locate_scan_error(std::string_view s, simdjson::error_code code) noexcept;

// A key path ("launches[2].args[0]") built on the stack as parsing descends.
// Rendering to text happens only when an error needs it, so visiting a
// million-element array costs no string building. A Path points at its
// parent: keep every level in a named variable that outlives its children.
class Path {
 public:
  Path() = default;  // the document root: renders as ""
  Path key(std::string_view k) const noexcept { return Path(this, k, 0, Kind::Key); }
  Path index(std::size_t i) const noexcept { return Path(this, {}, i, Kind::Index); }
  std::string str() const;

 private:
  enum class Kind : std::uint8_t { Root, Key, Index };
  Path(const Path* parent, std::string_view key, std::size_t index, Kind kind) noexcept
      : parent_(parent), key_(key), index_(index), kind_(kind) {}
  void append_to(std::string& out) const;

  const Path* parent_ = nullptr;
  std::string_view key_;
  std::size_t index_ = 0;
  Kind kind_ = Kind::Root;
};

// A value as a message shows it: its JSON text, cut to a readable length;
// objects and arrays as "an object" / "an array".
std::string describe_token(std::string_view raw_token);

// A strict reader of one document. Not movable: the document refers to the
// parser and all string_views it hands out live as long as the Reader.
class Reader {
 public:
  Reader(std::string_view origin, Status status) : origin_(origin), status_(status) {}
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;
  ~Reader() = default;

  // Parses `input` (copied into padded storage); the top level must be an object.
  Result<od::object> open(std::string_view input);
  // After the top-level object was consumed: anything but whitespace left is an error.
  Result<void> finish();

  // "<origin>: <path>: <what>"
  Error fail(const Path& at, std::string_view what) const;
  // "<origin>: <path>: expected <what>, got <value>"
  Error expected(const Path& at, std::string_view what, od::value& v) const;

  // "<origin>: <path>: <what>" for a path rendered earlier (Path::str()).
  Error fail(const std::string& at, std::string_view what) const;
  // The value's text as messages show it (before or after it was read).
  static std::string text(od::value& v);

  // Each getter's `what` is the "expected ..." text of its type error.
  Result<void> get_object(od::value& v, const Path& at, od::object& out, std::string_view what = "an object");
  Result<void> get_array(od::value& v, const Path& at, od::array& out, std::string_view what = "an array");
  Result<void> get_string(od::value& v, const Path& at, std::string_view& out, std::string_view what = "a string");
  Result<void> get_bool(od::value& v, const Path& at, bool& out, std::string_view what = "true or false");
  // Integers in [lo, hi]; fractions and out-of-range values are errors.
  // `what` replaces the default "an integer lo..hi" in the message.
  Result<void> get_int(od::value& v, const Path& at, std::int64_t lo, std::int64_t hi, std::int64_t& out,
                       std::string_view what = {});
  Result<void> get_uint(od::value& v, const Path& at, std::uint64_t lo, std::uint64_t hi, std::uint64_t& out,
                        std::string_view what = {});
  // Any JSON number, as a double. A finite literal that overflows a double
  // (1e400) is an error, not infinity.
  Result<void> get_double(od::value& v, const Path& at, double& out, std::string_view what = "a number");
  // True (and consumed) when `v` is null; false leaves `v` for another getter.
  Result<bool> is_null(od::value& v);
  // The first byte of the value's JSON text ('{', '[', '"', 't', ...), or 0.
  static char lead(od::value& v) noexcept;

  // Visits every field of `obj` in document order as fn(key, value, path) ->
  // Result<void>. Duplicate keys are errors; with a non-empty `keys` list, so
  // is any key not in it. Keys stay valid as long as the Reader.
  template <class F>
  Result<void> fields(od::object& obj, const Path& at, std::initializer_list<std::string_view> keys, F&& fn);
  // Visits every element as fn(index, value, path) -> Result<void>.
  template <class F>
  Result<void> elements(od::array& arr, const Path& at, F&& fn);

  // Broken JSON, located at `where` (a pointer into the input) or, when null,
  // at wherever the parser stopped.
  Error syntax(simdjson::error_code code, const char* where);

 private:
  static std::string_view token(od::value& v) noexcept;
  Error syntax_at(const char* where, std::string_view what) const;
  Error unknown_key(const Path& at, std::initializer_list<std::string_view> keys) const;
  // A value of the wrong kind: a type error if it is valid JSON of another
  // kind, a syntax error if it is no valid JSON at all ("tru", "]").
  Error mismatch(const Path& at, std::string_view what, od::value& v);
  // simdjson could not read a number: out of range (1e400) if the text is a
  // JSON number, else broken JSON ("01", "-").
  Error number_error(const Path& at, std::string_view what, od::value& v);

  std::string origin_;
  Status status_;
  simdjson::padded_string input_;  // "[" + the document + "]"
  std::string_view text_;           // the document itself, inside input_
  od::parser parser_;
  od::document doc_;
  bool doc_ready_ = false;
};

template <class F>
Result<void> Reader::fields(od::object& obj, const Path& at, std::initializer_list<std::string_view> keys, F&& fn) {
  assert(keys.size() <= 64);
  std::uint64_t seen_fixed = 0;         // bit i: keys[i] seen (fixed key sets are small)
  std::unordered_set<std::string_view> seen_free;  // free-form maps (names)
  for (auto item : obj) {
    od::field field;
    if (auto e = std::move(item).get(field)) return syntax(e, nullptr);
    std::string_view key;
    if (auto e = field.unescaped_key().get(key)) return syntax(e, nullptr);
    const Path child = at.key(key);
    if (keys.size() != 0) {
      std::size_t i = 0;
      for (auto k : keys) {
        if (k == key) break;
        ++i;
      }
      if (i == keys.size()) return unknown_key(child, keys);
      if (seen_fixed & (std::uint64_t{1} << i)) return fail(child, "duplicate key");
      seen_fixed |= std::uint64_t{1} << i;
    } else if (!seen_free.insert(key).second) {
      return fail(child, "duplicate key");
    }
    od::value value = field.value();
    Result<void> r = fn(key, value, child);
    if (!r) return r;
  }
  return {};
}

template <class F>
Result<void> Reader::elements(od::array& arr, const Path& at, F&& fn) {
  std::size_t i = 0;
  for (auto item : arr) {
    od::value value;
    if (auto e = item.get(value)) return syntax(e, nullptr);
    const Path child = at.index(i);
    Result<void> r = fn(i, value, child);
    if (!r) return r;
    ++i;
  }
  return {};
}

}  // namespace uvcl::json
