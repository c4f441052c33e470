#include "program/untrusted_source.hpp"

#include <array>
#include <vector>

namespace uvcl::job {

namespace {

bool ident_char(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// Directive names that read files or steer the compiler, and _Pragma.
constexpr std::array<std::string_view, 6> kDirectives = {"include", "include_next", "import", "pragma", "_Pragma",
                                                         "__pragma"};

// The reason an identifier is refused, or null.
const char* refused_identifier(std::string_view id) noexcept {
  if (id.find("printf") != std::string_view::npos)
    return "printf is not allowed: its output would go to the server's stdout";
  for (std::string_view d : kDirectives)
    if (id == d) return "preprocessor directives that read files or steer the compiler (#include, #pragma, _Pragma) "
                        "are not allowed";
  if (id.find("include") != std::string_view::npos)
    return "__has_include and the like are not allowed: they probe the server's files";
  return nullptr;
}

// The first refused identifier of `text`, after line splices are removed.
std::optional<std::string> scan(std::string_view text, bool name_lines) {
  std::string spliced;
  spliced.reserve(text.size());
  std::size_t line = 1;
  std::vector<std::size_t> line_of;  // spliced offset -> source line, at identifier starts only
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '?' && i + 2 < text.size() && text[i + 1] == '?' &&
        std::string_view("=/'()!<>-").find(text[i + 2]) != std::string_view::npos)
      return std::string(name_lines ? "line " + std::to_string(line) + ": " : "") + "trigraphs are not allowed";
    if (text[i] == '\\') {
      std::size_t j = i + 1;
      if (j < text.size() && text[j] == '\r') ++j;
      if (j < text.size() && text[j] == '\n') {
        i = j;
        ++line;
        continue;
      }
    }
    if (text[i] == '\n') ++line;
    spliced += text[i];
    line_of.push_back(line);
  }
  for (std::size_t i = 0; i < spliced.size();) {
    if (!ident_char(spliced[i])) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < spliced.size() && ident_char(spliced[j])) ++j;
    const std::string_view id(spliced.data() + i, j - i);
    if (const char* why = refused_identifier(id)) {
      std::string out = name_lines ? "line " + std::to_string(line_of[i]) + ": " : "";
      return out + "\"" + std::string(id) + "\": " + why;
    }
    i = j;
  }
  return std::nullopt;
}

bool allowed_option(std::string_view o) noexcept {
  return o.substr(0, 2) == "-D" || o.substr(0, 2) == "-U" || o == "-w" || o == "-Werror" || o.substr(0, 4) == "-cl-";
}

}  // namespace

std::optional<std::string> refuse_untrusted_source(std::string_view source) { return scan(source, true); }

std::optional<std::string> refuse_untrusted_options(std::string_view options) {
  for (char c : options)
    if (static_cast<unsigned char>(c) < 0x20 && c != ' ' && c != '\t')
      return std::string("control characters (a newline) are not allowed in build options");
  if (auto why = scan(options, false)) return why;
  bool operand = false;  // the token after a bare -D or -U is its definition
  std::size_t i = 0;
  while (i < options.size()) {
    while (i < options.size() && (options[i] == ' ' || options[i] == '\t')) ++i;
    std::size_t j = i;
    while (j < options.size() && options[j] != ' ' && options[j] != '\t') ++j;
    if (j == i) break;
    const std::string_view tok = options.substr(i, j - i);
    i = j;
    if (operand) {
      operand = false;
      continue;
    }
    if (!allowed_option(tok))
      return "\"" + std::string(tok) + "\" is not allowed (allowed: -D, -U, -w, -Werror, -cl-*)";
    operand = tok == "-D" || tok == "-U";
  }
  return std::nullopt;
}

std::string scrub_paths(std::string_view log) {
  std::string out;
  out.reserve(log.size());
  for (std::size_t i = 0; i < log.size();) {
    const bool word_start = i == 0 || std::string_view(" \t\n\"'(<[=`").find(log[i - 1]) != std::string_view::npos;
    if (log[i] != '/' || !word_start) {
      out += log[i++];
      continue;
    }
    std::size_t j = i;
    while (j < log.size() && std::string_view(" \t\n\"':>)]`").find(log[j]) == std::string_view::npos) ++j;
    const std::string_view path = log.substr(i, j - i);
    if (path.find('/', 1) == std::string_view::npos) {  // "/" alone or "/x": not a path (a division in a code line)
      out += path;
    } else {
      out += path.size() > 3 && path.substr(path.size() - 3) == ".cl" ? "<source>" : "<path>";
    }
    i = j;
  }
  return out;
}

}  // namespace uvcl::job
