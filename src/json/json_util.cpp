#include "json/json_util.hpp"

#include <cstring>
#include <optional>

namespace uvcl::json {

namespace {

bool is_plain_key(std::string_view k) noexcept {
  if (k.empty()) return false;
  for (char c : k) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::string_view trim_right(std::string_view s) noexcept {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

// Could `c` begin some JSON value? Anything else where a value belongs (a
// stray ']' or ',') means the document itself is broken.
bool starts_value(char c) noexcept {
  return c == '{' || c == '[' || c == '"' || c == 't' || c == 'f' || c == 'n' || c == '-' || is_digit(c);
}

// RFC 8259 number grammar. simdjson reports both "01" and "1e400" as
// NUMBER_ERROR; only the first is broken JSON, the second is a valid number
// out of range, which deserves a type-style message instead.
bool is_json_number(std::string_view s) noexcept {
  std::size_t i = 0;
  const std::size_t n = s.size();
  if (i < n && s[i] == '-') ++i;
  if (i >= n) return false;
  if (s[i] == '0') {
    ++i;
  } else if (is_digit(s[i])) {
    while (i < n && is_digit(s[i])) ++i;
  } else {
    return false;
  }
  if (i < n && s[i] == '.') {
    ++i;
    if (i >= n || !is_digit(s[i])) return false;
    while (i < n && is_digit(s[i])) ++i;
  }
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < n && (s[i] == '+' || s[i] == '-')) ++i;
    if (i >= n || !is_digit(s[i])) return false;
    while (i < n && is_digit(s[i])) ++i;
  }
  return i == n;
}

bool is_valid_atom(std::string_view tok) noexcept {
  if (tok.empty()) return false;
  switch (tok[0]) {
    case 't': return tok == "true";
    case 'f': return tok == "false";
    case 'n': return tok == "null";
    case '-': return is_json_number(tok);
    default: return is_digit(tok[0]) ? is_json_number(tok) : true;  // objects, arrays, strings: checked when read
  }
}

simdjson::error_code atom_error(char lead) noexcept {
  switch (lead) {
    case 't': return simdjson::T_ATOM_ERROR;
    case 'f': return simdjson::F_ATOM_ERROR;
    case 'n': return simdjson::N_ATOM_ERROR;
    case '-': return simdjson::NUMBER_ERROR;
    default: return is_digit(lead) ? simdjson::NUMBER_ERROR : simdjson::TAPE_ERROR;
  }
}

}  // namespace

// simdjson's first stage reports some errors without a position; find it.
std::optional<std::size_t> locate_scan_error(std::string_view s, simdjson::error_code code) noexcept {
  if (code == simdjson::UTF8_ERROR) return first_invalid_utf8(s);
  if (code != simdjson::UNESCAPED_CHARS && code != simdjson::UNCLOSED_STRING) return std::nullopt;
  bool in_string = false;
  std::size_t string_start = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (!in_string) {
      if (c == '"') {
        in_string = true;
        string_start = i;
      }
    } else if (c == '\\') {
      ++i;
    } else if (c == '"') {
      in_string = false;
    } else if (c < 0x20 && code == simdjson::UNESCAPED_CHARS) {
      return i;
    }
  }
  if (in_string && code == simdjson::UNCLOSED_STRING) return string_start;
  return std::nullopt;
}

void Path::append_to(std::string& out) const {
  if (parent_ != nullptr) parent_->append_to(out);
  switch (kind_) {
    case Kind::Root: break;
    case Kind::Key:
      if (is_plain_key(key_)) {
        if (!out.empty()) out += '.';
        out += key_;
      } else {
        out += '[';
        out += quote(key_);
        out += ']';
      }
      break;
    case Kind::Index:
      out += '[';
      out += std::to_string(index_);
      out += ']';
      break;
  }
}

std::string Path::str() const {
  std::string out;
  append_to(out);
  return out;
}

std::string describe_token(std::string_view raw_token) {
  std::string_view t = trim_right(raw_token);
  if (t.empty()) return "nothing";
  if (t[0] == '{') return "an object";
  if (t[0] == '[') return "an array";
  constexpr std::size_t kMax = 40;
  if (t.size() <= kMax) return std::string(t);
  std::size_t cut = kMax - 3;
  // Never split a UTF-8 sequence: back up over continuation bytes.
  while (cut > 0 && (static_cast<unsigned char>(t[cut]) & 0xc0) == 0x80) --cut;
  return std::string(t.substr(0, cut)) + "...";
}

Result<od::object> Reader::open(std::string_view input) {
  // The document is parsed wrapped in [ ]: simdjson rejects a root object
  // whose last token is not its '}' as "ended early" even when the object is
  // complete and trailing content follows; as the first array element, the
  // object parses on its own and whatever follows it is found exactly.
  input_ = simdjson::padded_string(input.size() + 2);
  if (input_.data() == nullptr) return fail(Path(), "out of memory copying the document");
  input_.data()[0] = '[';
  std::memcpy(input_.data() + 1, input.data(), input.size());
  input_.data()[input.size() + 1] = ']';
  text_ = std::string_view(input_.data() + 1, input.size());
  if (trim_right(text_).empty()) return syntax(simdjson::EMPTY, nullptr);

  if (auto e = parser_.iterate(input_).get(doc_)) {
    const std::optional<std::size_t> at = locate_scan_error(text_, e);
    return syntax(e, at ? text_.data() + *at : nullptr);
  }
  doc_ready_ = true;
  od::array wrapper;
  if (auto e = doc_.get_array().get(wrapper)) return syntax(e, nullptr);
  od::array_iterator first;
  if (auto e = wrapper.begin().get(first)) return syntax(e, nullptr);
  if (!(first != wrapper.end())) return syntax(simdjson::TAPE_ERROR, text_.data());  // the input began with ']'
  od::value root;
  if (auto e = (*first).get(root)) return syntax(e, nullptr);
  const std::string_view tok = token(root);
  if (tok.empty() || tok[0] != '{') {
    if (tok.empty() || !starts_value(tok[0]) || !is_valid_atom(tok))
      return syntax(tok.empty() ? simdjson::TAPE_ERROR : atom_error(tok[0]), tok.empty() ? nullptr : tok.data());
    return fail(Path(), "expected a JSON object at the top level, got " + describe_token(tok));
  }
  od::object obj;
  if (auto e = root.get_object().get(obj)) return syntax(e, tok.data());
  return obj;
}

Result<void> Reader::finish() {
  const char* loc = nullptr;
  if (auto e = doc_.current_location().get(loc)) return syntax(e, nullptr);
  if (loc == text_.data() + text_.size()) return {};  // the closing ']' of the wrapper
  return syntax_at(loc, "unexpected content after the top-level object");
}

Error Reader::fail(const Path& at, std::string_view what) const { return fail(at.str(), what); }

Error Reader::fail(const std::string& at, std::string_view what) const {
  std::string msg;
  if (!origin_.empty()) msg = origin_ + ": ";
  if (!at.empty()) msg += at + ": ";
  msg += what;
  return make_error(status_, std::move(msg));
}

std::string Reader::text(od::value& v) { return describe_token(token(v)); }

Error Reader::expected(const Path& at, std::string_view what, od::value& v) const {
  std::string msg = "expected ";
  msg += what;
  msg += ", got ";
  msg += text(v);
  return fail(at, msg);
}

Error Reader::syntax(simdjson::error_code code, const char* where) {
  if (where == nullptr && doc_ready_) {
    const char* loc = nullptr;
    if (doc_.current_location().get(loc) == simdjson::SUCCESS) where = loc;
  }
  return syntax_at(where, simdjson::error_message(code));
}

Error Reader::syntax_at(const char* where, std::string_view what) const {
  std::string msg = "malformed JSON";
  // The wrapper's ']' sits one past the input: the input ended there.
  if (where != nullptr && where >= text_.data() && where <= text_.data() + text_.size()) {
    const auto offset = static_cast<std::size_t>(where - text_.data());
    std::size_t line = 1, column = 1;
    for (std::size_t i = 0; i < offset; ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    msg += " at byte " + std::to_string(offset) + " (line " + std::to_string(line) + ", column " +
           std::to_string(column) + ")";
  }
  msg += ": ";
  msg += what;
  return fail(Path(), msg);
}

std::string_view Reader::token(od::value& v) noexcept { return trim_right(v.raw_json_token()); }

char Reader::lead(od::value& v) noexcept {
  const std::string_view t = token(v);
  return t.empty() ? '\0' : t[0];
}

Error Reader::unknown_key(const Path& at, std::initializer_list<std::string_view> keys) const {
  std::string msg = "unknown key (expected one of: ";
  bool first = true;
  for (auto k : keys) {
    if (!first) msg += ", ";
    msg += k;
    first = false;
  }
  msg += ")";
  return fail(at, msg);
}

Error Reader::mismatch(const Path& at, std::string_view what, od::value& v) {
  const std::string_view tok = token(v);
  if (tok.empty() || !starts_value(tok[0]) || !is_valid_atom(tok))
    return syntax(tok.empty() ? simdjson::TAPE_ERROR : atom_error(tok[0]), tok.empty() ? nullptr : tok.data());
  return expected(at, what, v);
}

Error Reader::number_error(const Path& at, std::string_view what, od::value& v) {
  const std::string_view tok = token(v);
  if (!is_json_number(tok)) return syntax(simdjson::NUMBER_ERROR, tok.data());
  return expected(at, what, v);
}

Result<void> Reader::get_object(od::value& v, const Path& at, od::object& out, std::string_view what) {
  if (lead(v) != '{') return mismatch(at, what, v);
  if (auto e = v.get_object().get(out)) return syntax(e, token(v).data());
  return {};
}

Result<void> Reader::get_array(od::value& v, const Path& at, od::array& out, std::string_view what) {
  if (lead(v) != '[') return mismatch(at, what, v);
  if (auto e = v.get_array().get(out)) return syntax(e, token(v).data());
  return {};
}

Result<void> Reader::get_string(od::value& v, const Path& at, std::string_view& out, std::string_view what) {
  if (lead(v) != '"') return mismatch(at, what, v);
  const char* where = token(v).data();
  if (auto e = v.get_string().get(out)) return syntax(e, where);
  return {};
}

Result<void> Reader::get_bool(od::value& v, const Path& at, bool& out, std::string_view what) {
  const char c = lead(v);
  if (c != 't' && c != 'f') return mismatch(at, what, v);
  const std::string_view tok = token(v);
  if (!is_valid_atom(tok)) return syntax(atom_error(c), tok.data());
  if (auto e = v.get_bool().get(out)) return syntax(e, tok.data());
  return {};
}

Result<bool> Reader::is_null(od::value& v) {
  if (lead(v) != 'n') return false;
  const std::string_view tok = token(v);
  if (!is_valid_atom(tok)) return syntax(simdjson::N_ATOM_ERROR, tok.data());
  bool null = false;
  if (auto e = v.is_null().get(null)) return syntax(e, tok.data());
  return null;
}

namespace {
// Built only on failure: integer reads sit in loops over whole data arrays.
std::string range_text(std::string_view what, auto lo, auto hi) {
  if (!what.empty()) return std::string(what);
  return "an integer " + std::to_string(lo) + ".." + std::to_string(hi);
}
}  // namespace

Result<void> Reader::get_int(od::value& v, const Path& at, std::int64_t lo, std::int64_t hi, std::int64_t& out,
                             std::string_view what) {
  const char c = lead(v);
  if (c != '-' && !is_digit(c)) return mismatch(at, range_text(what, lo, hi), v);
  od::number n;
  if (v.get_number().get(n) != simdjson::SUCCESS) return number_error(at, range_text(what, lo, hi), v);
  if (n.get_number_type() != od::number_type::signed_integer || n.get_int64() < lo || n.get_int64() > hi)
    return expected(at, range_text(what, lo, hi), v);
  out = n.get_int64();
  return {};
}

Result<void> Reader::get_uint(od::value& v, const Path& at, std::uint64_t lo, std::uint64_t hi, std::uint64_t& out,
                              std::string_view what) {
  const char c = lead(v);
  if (c != '-' && !is_digit(c)) return mismatch(at, range_text(what, lo, hi), v);
  od::number n;
  if (v.get_number().get(n) != simdjson::SUCCESS) return number_error(at, range_text(what, lo, hi), v);
  std::uint64_t x = 0;
  if (n.get_number_type() == od::number_type::unsigned_integer) {
    x = n.get_uint64();
  } else if (n.get_number_type() == od::number_type::signed_integer && n.get_int64() >= 0) {
    x = static_cast<std::uint64_t>(n.get_int64());
  } else {
    return expected(at, range_text(what, lo, hi), v);
  }
  if (x < lo || x > hi) return expected(at, range_text(what, lo, hi), v);
  out = x;
  return {};
}

Result<void> Reader::get_double(od::value& v, const Path& at, double& out, std::string_view what) {
  const char c = lead(v);
  if (c != '-' && !is_digit(c)) return mismatch(at, what, v);
  if (v.get_double().get(out) != simdjson::SUCCESS) return number_error(at, what, v);
  return {};
}

}  // namespace uvcl::json
