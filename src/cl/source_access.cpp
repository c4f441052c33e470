// source_access.cpp — parameter use from kernel source: a small lexer (no
// preprocessor: a source that needs one is not analysed), the kernel
// definitions found in its tokens, and two patterns checked on each body.
#include "cl/source_access.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <optional>
#include <unordered_map>

namespace uvcl::cl {

namespace {

enum class Kind { Ident, Number, Literal, Punct };

struct Tok {
  Kind kind = Kind::Punct;
  std::string_view text;
  bool is(std::string_view t) const { return text == t && kind != Kind::Literal; }
};

bool ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool digit(char c) { return c >= '0' && c <= '9'; }
bool ident_char(char c) { return ident_start(c) || digit(c); }
bool blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

// Phase 2 of translation: a backslash, optional blanks (clang accepts them),
// then a newline join two lines, also inside identifiers.
std::string splice_lines(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\') {
      std::size_t j = i + 1;
      while (j < s.size() && blank(s[j])) ++j;
      if (j < s.size() && s[j] == '\n') {
        i = j;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

bool has_trigraph(std::string_view s) {
  for (std::size_t i = 0; i + 2 < s.size(); ++i)
    if (s[i] == '?' && s[i + 1] == '?' && std::strchr("=/'()!<>-", s[i + 2]) && s[i + 2] != '\0') return true;
  return false;
}

constexpr std::array<std::string_view, 3> kPunct3 = {"<<=", ">>=", "..."};
constexpr std::array<std::string_view, 19> kPunct2 = {"->", "++", "--", "<<", ">>", "<=", ">=", "==", "!=", "&&",
                                                      "||", "*=", "/=", "%=", "+=", "-=", "&=", "^=", "|="};
constexpr std::array<std::string_view, 5> kDigraphs = {"<:", ":>", "<%", "%>", "%:"};
constexpr std::string_view kPunct1 = "[](){}.&*+-~!/%<>^|?:;=,";

// Skips a block comment opening at s[i] ("/*"); npos when unterminated.
std::size_t skip_block_comment(std::string_view s, std::size_t i) {
  const std::size_t end = s.find("*/", i + 2);
  return end == std::string_view::npos ? end : end + 2;
}

// Tokens without comments, literals as one Literal token each, #pragma lines
// dropped. False: another directive, or text the lexer does not know.
bool lex(std::string_view s, std::vector<Tok>& out) {
  bool line_start = true;
  std::size_t i = 0;
  const std::size_t n = s.size();
  while (i < n) {
    const char c = s[i];
    if (c == '\n') {
      line_start = true;
      ++i;
      continue;
    }
    if (blank(c)) {
      ++i;
      continue;
    }
    if (c == '/' && i + 1 < n && s[i + 1] == '/') {
      while (i < n && s[i] != '\n') ++i;
      continue;
    }
    if (c == '/' && i + 1 < n && s[i + 1] == '*') {
      i = skip_block_comment(s, i);
      if (i == std::string_view::npos) return false;
      continue;
    }
    if (c == '#') {
      if (!line_start) return false;
      std::size_t j = i + 1;
      while (j < n && blank(s[j])) ++j;
      std::size_t k = j;
      while (k < n && ident_char(s[k])) ++k;
      if (s.substr(j, k - j) != "pragma") return false;
      // The rest of the line; a block comment may carry it past a newline.
      while (k < n && s[k] != '\n') {
        if (s[k] == '/' && k + 1 < n && s[k + 1] == '*') {
          k = skip_block_comment(s, k);
          if (k == std::string_view::npos) return false;
        } else {
          ++k;
        }
      }
      i = k;
      continue;
    }
    line_start = false;
    if (c == '"' || c == '\'') {
      std::size_t j = i + 1;
      while (j < n && s[j] != c) {
        if (s[j] == '\n') return false;
        j += s[j] == '\\' ? 2 : 1;
      }
      if (j >= n) return false;
      out.push_back(Tok{Kind::Literal, s.substr(i, j + 1 - i)});
      i = j + 1;
      continue;
    }
    if (ident_start(c)) {
      std::size_t j = i + 1;
      while (j < n && ident_char(s[j])) ++j;
      out.push_back(Tok{Kind::Ident, s.substr(i, j - i)});
      i = j;
      continue;
    }
    if (digit(c) || (c == '.' && i + 1 < n && digit(s[i + 1]))) {
      std::size_t j = i + 1;
      while (j < n) {
        const char d = s[j];
        const char prev = s[j - 1];
        const bool exponent_sign = (d == '+' || d == '-') && (prev == 'e' || prev == 'E' || prev == 'p' || prev == 'P');
        if (!ident_char(d) && d != '.' && !exponent_sign) break;
        ++j;
      }
      out.push_back(Tok{Kind::Number, s.substr(i, j - i)});
      i = j;
      continue;
    }
    const std::string_view rest = s.substr(i);
    for (std::string_view d : kDigraphs)
      if (rest.substr(0, 2) == d) return false;
    std::size_t len = 0;
    for (std::string_view p : kPunct3)
      if (rest.substr(0, 3) == p) len = 3;
    if (len == 0)
      for (std::string_view p : kPunct2)
        if (rest.substr(0, 2) == p) len = 2;
    if (len == 0 && kPunct1.find(c) != std::string_view::npos) len = 1;
    if (len == 0) return false;  // a backslash, $, @, `, a byte outside ASCII ...
    out.push_back(Tok{Kind::Punct, s.substr(i, len)});
    i += len;
  }
  return true;
}

// match[i]: the index of the bracket closing or opening toks[i]; npos for
// other tokens. False: unbalanced.
bool match_brackets(const std::vector<Tok>& toks, std::vector<std::size_t>& match) {
  match.assign(toks.size(), std::string_view::npos);
  std::vector<std::size_t> open;
  for (std::size_t i = 0; i < toks.size(); ++i) {
    if (toks[i].kind != Kind::Punct || toks[i].text.size() != 1) continue;
    const char c = toks[i].text[0];
    if (c == '(' || c == '[' || c == '{') {
      open.push_back(i);
    } else if (c == ')' || c == ']' || c == '}') {
      if (open.empty()) return false;
      const char o = toks[open.back()].text[0];
      if ((c == ')' && o != '(') || (c == ']' && o != '[') || (c == '}' && o != '{')) return false;
      match[i] = open.back();
      match[open.back()] = i;
      open.pop_back();
    }
  }
  return open.empty();
}

// Macro names the build options define (-DNAME, -D NAME=x). nullopt: an
// option that brings in a file of macros.
std::optional<std::vector<std::string>> option_macros(std::string_view options) {
  std::vector<std::string> words;
  std::size_t i = 0;
  while (i < options.size()) {
    while (i < options.size() && (blank(options[i]) || options[i] == '\n')) ++i;
    std::size_t j = i;
    while (j < options.size() && !blank(options[j]) && options[j] != '\n') ++j;
    if (j > i) words.emplace_back(options.substr(i, j - i));
    i = j;
  }
  std::vector<std::string> names;
  for (std::size_t w = 0; w < words.size(); ++w) {
    const std::string& word = words[w];
    if (word.rfind("-include", 0) == 0 || word.rfind("-imacros", 0) == 0) return std::nullopt;
    if (word.rfind("-D", 0) != 0) continue;
    std::string def = word.substr(2);
    if (def.empty() && w + 1 < words.size()) def = words[++w];
    while (!def.empty() && (def.front() == '"' || def.front() == '\'')) def.erase(0, 1);
    std::size_t end = 0;
    while (end < def.size() && ident_char(def[end])) ++end;
    if (end == 0) return std::nullopt;  // not a name uvcl can read: assume the worst
    names.push_back(def.substr(0, end));
  }
  return names;
}

bool is_attribute(const Tok& t) { return t.is("__attribute__") || t.is("__attribute"); }

bool is_assign_op(const Tok& t) {
  static constexpr std::array<std::string_view, 13> ops = {"=",  "+=", "-=", "*=", "/=", "%=", "<<=",
                                                           ">>=", "&=", "^=", "|=", "++", "--"};
  return t.kind == Kind::Punct && std::find(ops.begin(), ops.end(), t.text) != ops.end();
}

bool is_index_type_word(const Tok& t) {
  static constexpr std::array<std::string_view, 10> words = {"const", "size_t", "int",    "uint",      "unsigned",
                                                             "long",  "ulong",  "signed", "__private", "private"};
  return t.kind == Kind::Ident && std::find(words.begin(), words.end(), t.text) != words.end();
}

bool is_zero(const Tok& t) { return t.kind == Kind::Number && (t.text == "0" || t.text == "0u" || t.text == "0U"); }

class Analysis {
 public:
  Analysis(const std::vector<Tok>& toks, const std::vector<std::size_t>& match, bool global_id_is_builtin)
      : t_(toks), m_(match), global_id_builtin_(global_id_is_builtin) {}

  // The kernel whose `kernel` keyword is toks[i]: its uses, or nullopt when
  // not understood or a declaration only. *next: where to go on.
  std::optional<KernelUses> kernel_at(std::size_t i, std::size_t* next) const {
    *next = i + 1;
    std::size_t j = i + 1;
    bool saw_void = false;
    while (j < t_.size()) {
      if (is_attribute(t_[j]) && j + 1 < t_.size() && t_[j + 1].is("(")) {
        j = m_[j + 1] + 1;
      } else if (t_[j].is("void") && !saw_void) {
        saw_void = true;
        ++j;
      } else {
        break;
      }
    }
    if (!saw_void || j + 1 >= t_.size() || t_[j].kind != Kind::Ident || !t_[j + 1].is("(")) return std::nullopt;
    KernelUses k;
    k.name = std::string(t_[j].text);
    const std::size_t open = j + 1, close = m_[open];
    std::size_t b = close + 1;
    while (b + 1 < t_.size() && is_attribute(t_[b]) && t_[b + 1].is("(")) b = m_[b + 1] + 1;
    if (b >= t_.size() || !t_[b].is("{")) {
      *next = b;
      return std::nullopt;  // a declaration (";"), or not understood
    }
    *next = m_[b] + 1;
    std::vector<std::string_view> names;
    if (!param_names(open + 1, close, names)) return std::nullopt;
    analyse_body(b, m_[b], names, k);
    return k;
  }

 private:
  bool param_names(std::size_t a, std::size_t b, std::vector<std::string_view>& names) const {
    if (a == b || (b == a + 1 && t_[a].is("void"))) return true;
    std::size_t start = a;
    for (std::size_t x = a; x <= b; ++x) {
      if (x < b && m_[x] != std::string_view::npos && m_[x] > x) {
        x = m_[x];
        continue;
      }
      if (x < b && !t_[x].is(",")) continue;
      // [start, x) is one parameter: its name is its last token, after a type.
      if (x - start < 2 || t_[x - 1].kind != Kind::Ident) return false;
      const std::string_view name = t_[x - 1].text;
      if (std::find(names.begin(), names.end(), name) != names.end()) return false;
      names.push_back(name);
      start = x + 1;
    }
    return true;
  }

  void analyse_body(std::size_t open, std::size_t close, const std::vector<std::string_view>& names,
                    KernelUses& k) const {
    std::unordered_map<std::string_view, std::size_t> index;
    for (std::size_t p = 0; p < names.size(); ++p) index.emplace(names[p], p);
    std::vector<std::size_t> count(names.size(), 0);
    std::vector<bool> other(names.size(), false);
    bool jumps = false;
    for (std::size_t x = open + 1; x < close; ++x) {
      const Tok& tok = t_[x];
      if (tok.is("return") || tok.is("goto")) jumps = true;
      if (tok.kind != Kind::Ident) continue;
      auto it = index.find(tok.text);
      if (it == index.end()) continue;
      ++count[it->second];
      if (!plain_store(x)) other[it->second] = true;
    }
    k.params.resize(names.size());
    for (std::size_t p = 0; p < names.size(); ++p) {
      k.params[p].name = std::string(names[p]);
      k.params[p].never_read = count[p] > 0 && !other[p];
    }
    if (jumps || !global_id_builtin_) return;
    each_item_stores(open, close, index, k);
  }

  // toks[x] is `NAME [ ... ] =`, the `=` plain assignment, and NAME not a
  // member, an operand of & or *, or incremented.
  bool plain_store(std::size_t x) const {
    const Tok& prev = t_[x - 1];
    if (prev.is(".") || prev.is("->") || prev.is("&") || prev.is("*") || prev.is("++") || prev.is("--")) return false;
    if (x + 1 >= t_.size() || !t_[x + 1].is("[")) return false;
    const std::size_t close = m_[x + 1];
    return close + 1 < t_.size() && t_[close + 1].is("=");
  }

  void each_item_stores(std::size_t open, std::size_t close,
                        const std::unordered_map<std::string_view, std::size_t>& index, KernelUses& k) const {
    // Statement starts of the outermost block: its first token, and the
    // tokens after a `;` or a closed block at that level.
    std::vector<std::size_t> starts;
    int braces = 1, parens = 0;
    bool at_start = true;
    for (std::size_t x = open + 1; x < close; ++x) {
      const Tok& tok = t_[x];
      if (tok.is("}")) --braces;
      if (tok.is(")") || tok.is("]")) --parens;
      const bool top = braces == 1 && parens == 0;
      if (top && at_start) starts.push_back(x);
      at_start = top && (tok.is(";") || tok.is("}"));
      if (tok.is("{")) ++braces;
      if (tok.is("(") || tok.is("[")) ++parens;
    }
    // `TYPE IDX = get_global_id(0);` at that level: IDX -> where.
    std::unordered_map<std::string_view, std::size_t> ids;
    std::vector<std::string_view> twice;
    for (std::size_t s : starts) {
      std::size_t x = s;
      while (x < close && is_index_type_word(t_[x])) ++x;
      if (x == s || x + 7 > close || t_[x].kind != Kind::Ident) continue;
      if (t_[x + 1].is("=") && t_[x + 2].is("get_global_id") && t_[x + 3].is("(") && is_zero(t_[x + 4]) &&
          t_[x + 5].is(")") && t_[x + 6].is(";")) {
        if (!ids.emplace(t_[x].text, x).second) twice.push_back(t_[x].text);
      }
    }
    for (std::string_view name : twice) ids.erase(name);
    std::unordered_map<std::string_view, bool> kept;  // unchanged(), once per variable
    for (std::size_t s : starts) {
      auto it = index.find(t_[s].kind == Kind::Ident ? t_[s].text : std::string_view{});
      if (it == index.end() || !k.params[it->second].never_read || k.params[it->second].writes_each_global_id)
        continue;
      if (s + 1 >= close || !t_[s + 1].is("[")) continue;
      const std::size_t a = s + 2, b = m_[s + 1];
      bool each = false;
      if (b == a + 4) {
        each = t_[a].is("get_global_id") && t_[a + 1].is("(") && is_zero(t_[a + 2]) && t_[a + 3].is(")");
      } else if (b == a + 1 && t_[a].kind == Kind::Ident) {
        auto id = ids.find(t_[a].text);
        if (id != ids.end() && id->second < s) {
          auto known = kept.find(id->first);
          if (known == kept.end())
            known = kept.emplace(id->first, unchanged(id->first, id->second, open, close)).first;
          each = known->second;
        }
      }
      if (each) k.params[it->second].writes_each_global_id = true;
    }
  }

  // The variable declared at toks[decl] is never assigned, incremented or
  // has its address taken in the body.
  bool unchanged(std::string_view name, std::size_t decl, std::size_t open, std::size_t close) const {
    for (std::size_t x = open + 1; x < close; ++x) {
      if (x == decl || t_[x].kind != Kind::Ident || t_[x].text != name) continue;
      if (x + 1 < close && is_assign_op(t_[x + 1])) return false;
      const Tok& prev = t_[x - 1];
      if (prev.is("++") || prev.is("--") || prev.is("&")) return false;
    }
    return true;
  }

  const std::vector<Tok>& t_;
  const std::vector<std::size_t>& m_;
  bool global_id_builtin_;
};

}  // namespace

std::vector<KernelUses> kernel_uses(std::string_view source, std::string_view build_options) {
  if (has_trigraph(source)) return {};
  const std::string text = splice_lines(source);
  std::vector<Tok> toks;
  std::vector<std::size_t> match;
  if (!lex(text, toks) || !match_brackets(toks, match)) return {};
  auto macros = option_macros(build_options);
  if (!macros) return {};
  for (const Tok& t : toks)
    if (t.kind == Kind::Ident && std::find(macros->begin(), macros->end(), t.text) != macros->end()) return {};
  // get_global_id is OpenCL's unless the source declares its own (at file
  // scope, outside every body).
  bool builtin = true;
  for (std::size_t i = 0; i < toks.size(); ++i) {
    if (toks[i].is("{")) i = match[i];
    else if (toks[i].is("get_global_id")) builtin = false;
  }
  Analysis analysis(toks, match, builtin);
  std::vector<KernelUses> kernels;
  std::vector<std::string> defined_twice;
  for (std::size_t i = 0; i < toks.size();) {
    if (toks[i].is("{")) {
      i = match[i] + 1;
      continue;
    }
    if (!toks[i].is("kernel") && !toks[i].is("__kernel")) {
      ++i;
      continue;
    }
    std::size_t next = i + 1;
    auto k = analysis.kernel_at(i, &next);
    i = next;
    if (!k) continue;
    for (const KernelUses& seen : kernels)
      if (seen.name == k->name) defined_twice.push_back(k->name);
    kernels.push_back(std::move(*k));
  }
  std::erase_if(kernels, [&](const KernelUses& k) {
    return std::find(defined_twice.begin(), defined_twice.end(), k.name) != defined_twice.end();
  });
  return kernels;
}

std::vector<ParamUse> param_uses(std::string_view source, std::string_view kernel_name,
                                 std::string_view build_options) {
  for (KernelUses& k : kernel_uses(source, build_options))
    if (k.name == kernel_name) return std::move(k.params);
  return {};
}

}  // namespace uvcl::cl
