// job_answer.cpp — see job_answer.hpp.
#include "job_answer.hpp"

#include <uv.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>
#include <string_view>
#include <utility>
#include <vector>

#include "json/text.hpp"
#include "uvcl/types.hpp"

namespace uvcl::cli {
namespace {

// What one call to BodySource::next() produces, about: small enough that
// formatting it is a short step of the loop, large enough that the pieces'
// own costs (a write each, a chunk header) do not show.
constexpr std::size_t kPieceBytes = 64u << 10;
constexpr std::size_t kBinaryPieceBytes = 256u << 10;  // copied by the kernel only
constexpr std::uint64_t kAnswerOverhead = 4096;         // {"device": {...}, "stats": {...}}, part headers

// The most bytes of JSON one element of type `t` prints as in an answer
// (job::result_json: shortest round-trip form, or "nan", "-inf").
std::uint64_t max_element_text(ScalarType t) {
  switch (t) {
    case ScalarType::Char: return 4;  // -128
    case ScalarType::UChar: return 3;
    case ScalarType::Short: return 6;
    case ScalarType::UShort: return 5;
    case ScalarType::Int: return 11;
    case ScalarType::UInt: return 10;
    case ScalarType::Long:
    case ScalarType::ULong: return 20;
    case ScalarType::Half:  // printed as the float it is
    case ScalarType::Float: return 15;  // -1.17549435e-38
    case ScalarType::Double: return 24;  // -2.2250738585072014e-308
  }
  return 24;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// JSON, formatted as it is sent. The text is job::result_json's own: each
// piece is result_json of a job result holding a slice of one output,
// stripped of what surrounds that slice. The runner formats only whole
// results, and the answer must stay byte for byte what `uvcl run` prints.
class JsonAnswer final : public http::BodySource {
 public:
  JsonAnswer(const Engine& engine, job::RunResult result, std::shared_ptr<void> hold)
      : engine_(engine), result_(std::move(result)), hold_(std::move(hold)) {
    // With no outputs: {"device": D, "outputs": {}, "stats": S}: the text
    // before the outputs and after them is the same in every slice.
    std::vector<job::Output> outputs = std::exchange(result_.outputs, {});
    const std::string empty = job::result_json(engine_, result_);
    result_.outputs = std::move(outputs);
    const std::size_t open = empty.rfind("\"outputs\": {}") + std::strlen("\"outputs\": {");
    head_len_ = open;
    tail_ = empty.substr(open) + "\n";
    text_ = empty.substr(0, open);  // the first piece starts with it
  }

  std::string_view next() override {
    if (done_) return {};
    if (started_) text_.clear();
    started_ = true;
    while (text_.size() < kPieceBytes) {
      if (output_ == result_.outputs.size()) {
        text_ += tail_;
        done_ = true;
        break;
      }
      job::Output& o = result_.outputs[output_];
      const std::size_t count = o.data.size() / scalar_size(o.type);
      if (element_ == 0 && !named_) {
        if (output_ > 0) text_ += ", ";
        const std::string named = slice_json(o.name, o, 0, 0);  // NAME: []
        text_.append(named, 0, named.size() - 1);
        named_ = true;
      }
      if (element_ < count) {
        const std::size_t per_piece = std::max<std::size_t>(1, kPieceBytes / (max_element_text(o.type) + 2));
        const std::size_t n = std::min(per_piece, count - element_);
        const std::string values = slice_json({}, o, element_, n);  // "": [V, ...]
        if (element_ > 0) text_ += ", ";
        text_.append(values, 5, values.size() - 6);
        element_ += n;
      }
      if (element_ == count) {
        text_ += ']';
        o.data = {};  // sent: its memory goes back now
        ++output_;
        element_ = 0;
        named_ = false;
      }
    }
    return text_;
  }

 private:
  // result_json of one output named `name` holding elements [first, first
  // + n) of `o`, without what surrounds the output: `NAME: [V, ...]`.
  std::string slice_json(std::string name, const job::Output& o, std::size_t first, std::size_t n) {
    const std::size_t size = scalar_size(o.type);
    job::RunResult one;
    one.device = result_.device;
    one.stats = result_.stats;
    one.outputs.push_back(job::Output{std::move(name), o.type,
                                      std::vector<std::byte>(o.data.begin() + static_cast<std::ptrdiff_t>(first * size),
                                                             o.data.begin() + static_cast<std::ptrdiff_t>((first + n) * size))});
    std::string full = job::result_json(engine_, one);
    return full.substr(head_len_, full.size() - head_len_ - (tail_.size() - 1));
  }

  const Engine& engine_;
  job::RunResult result_;
  std::shared_ptr<void> hold_;
  std::size_t head_len_ = 0;
  std::string tail_;
  std::string text_;
  std::size_t output_ = 0, element_ = 0;
  bool named_ = false, started_ = false, done_ = false;
};

// A body of known parts: bytes of its own (part headers) and the outputs'
// bytes, sent from where they are, in pieces of kBinaryPieceBytes.
class PartsAnswer final : public http::BodySource {
 public:
  PartsAnswer(job::RunResult result, std::shared_ptr<void> hold)
      : result_(std::move(result)), hold_(std::move(hold)) {}

  void add_text(std::string s) {
    texts_.push_back(std::move(s));
    parts_.push_back(texts_.back());
  }
  void add_output(std::size_t i) {
    const std::vector<std::byte>& d = result_.outputs[i].data;
    parts_.emplace_back(reinterpret_cast<const char*>(d.data()), d.size());
  }
  std::uint64_t size() const {
    std::uint64_t n = 0;
    for (std::string_view p : parts_) n += p.size();
    return n;
  }
  const job::RunResult& result() const { return result_; }

  std::string_view next() override {
    while (part_ < parts_.size() && offset_ == parts_[part_].size()) {
      ++part_;
      offset_ = 0;
    }
    if (part_ == parts_.size()) return {};
    const std::string_view piece = parts_[part_].substr(offset_, kBinaryPieceBytes);
    offset_ += piece.size();
    return piece;
  }

 private:
  job::RunResult result_;
  std::shared_ptr<void> hold_;
  std::deque<std::string> texts_;  // push_back moves no element: the views stay valid
  std::vector<std::string_view> parts_;
  std::size_t part_ = 0, offset_ = 0;
};

// A multipart boundary that no output's bytes are likely to contain.
std::string boundary() {
  static std::uint64_t counter = 0;
  char b[64];
  std::snprintf(b, sizeof b, "uvcl-%016llx-%llu", static_cast<unsigned long long>(uv_hrtime() * 0x9E3779B97F4A7C15ull),
                static_cast<unsigned long long>(++counter));
  return b;
}

}  // namespace

AnswerFormat answer_format(const std::string* accept) {
  if (!accept) return AnswerFormat::Json;
  std::string_view rest = *accept;
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    std::string_view range = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    range = trim(range.substr(0, range.find(';')));
    if (iequals(range, "application/octet-stream")) return AnswerFormat::Octets;
    if (iequals(range, "multipart/mixed")) return AnswerFormat::MultipartNpy;
  }
  return AnswerFormat::Json;
}

Result<void> check_answer_format(AnswerFormat format, const job::Job& job) {
  if (format == AnswerFormat::Octets && job.outputs.size() != 1)
    return Error{Status::InvalidArgument,
                 "Accept: application/octet-stream carries one output, and this job has " +
                     std::to_string(job.outputs.size()) +
                     "; ask for multipart/mixed (one .npy part per output) or application/json"};
  return {};
}

std::uint64_t answer_bound(AnswerFormat format, const job::Job& job) {
  std::uint64_t total = kAnswerOverhead;
  for (std::size_t o : job.outputs) {
    const job::Buffer& b = job.buffers[o];
    const std::uint64_t per_element =
        format == AnswerFormat::Json ? max_element_text(b.type) + 2 : scalar_size(b.type);
    // Its name (escaped, up to 6 bytes a byte) and, in a multipart answer,
    // its part's headers and .npy header.
    const std::uint64_t around = 6 * b.name.size() + (format == AnswerFormat::Json ? 8 : 512);
    std::uint64_t bytes = 0;
    if (__builtin_mul_overflow(b.count, per_element, &bytes) || __builtin_add_overflow(total, bytes, &total) ||
        __builtin_add_overflow(total, around, &total))
      return UINT64_MAX;
  }
  return total;
}

std::uint64_t output_bytes(const job::Job& job) {
  std::uint64_t total = 0;
  for (std::size_t o : job.outputs) {
    const job::Buffer& b = job.buffers[o];
    std::uint64_t bytes = 0;
    if (__builtin_mul_overflow(b.count, scalar_size(b.type), &bytes) || __builtin_add_overflow(total, bytes, &total))
      return UINT64_MAX;
  }
  return total;
}

Result<void> check_answer_size(AnswerFormat format, const job::Job& job, std::uint64_t limit) {
  if (limit == 0) return {};
  const std::uint64_t total = answer_bound(format, job);
  if (total <= limit) return {};
  std::string what;
  for (std::size_t i = 0; i < job.outputs.size() && i < 5; ++i) {
    const job::Buffer& b = job.buffers[job.outputs[i]];
    what += (what.empty() ? "" : ", ") +
            (i < 4 ? b.name + ": " + std::to_string(b.count) + " " + std::string(scalar_type_name(b.type))
                   : std::string("..."));
  }
  return Error{Status::InvalidArgument,
               "request: outputs (" + what + "): the answer could take up to " +
                   (total == UINT64_MAX ? std::string("more than 2^64 - 1") : std::to_string(total)) +
                   " bytes, the limit is " + std::to_string(limit) + " (--max-response-bytes)"};
}

http::StreamedResponse job_answer(const Engine& engine, job::RunResult result, AnswerFormat format,
                                  std::shared_ptr<void> hold) {
  http::StreamedResponse r;
  if (format == AnswerFormat::Json) {
    // A small answer is formatted at once and sent with Content-Length: one
    // piece either way, without the slices' extra formatting.
    std::uint64_t bound = kAnswerOverhead;
    for (const job::Output& o : result.outputs)
      bound += o.data.size() / scalar_size(o.type) * (max_element_text(o.type) + 2) + 6 * o.name.size() + 8;
    if (bound > kPieceBytes) {
      r.body = std::make_unique<JsonAnswer>(engine, std::move(result), std::move(hold));
      return r;
    }
    auto whole = std::make_unique<PartsAnswer>(job::RunResult{}, std::move(hold));
    whole->add_text(job::result_json(engine, result) + "\n");
    r.content_length = whole->size();
    r.body = std::move(whole);
    return r;
  }
  const std::size_t outputs = result.outputs.size();
  auto parts = std::make_unique<PartsAnswer>(std::move(result), std::move(hold));
  const job::RunResult& res = parts->result();
  if (format == AnswerFormat::Octets) {
    const job::Output& o = res.outputs.at(0);
    r.content_type = "application/octet-stream";
    r.headers.push_back({"Uvcl-Output-Name", json::quote(o.name)});
    r.headers.push_back({"Uvcl-Output-Type", std::string(scalar_type_name(o.type))});
    r.headers.push_back({"Uvcl-Output-Count", std::to_string(o.data.size() / scalar_size(o.type))});
    parts->add_output(0);
  } else {
    const std::string b = boundary();
    r.content_type = "multipart/mixed; boundary=" + b;
    job::RunResult summary;  // device and stats: result_json without the outputs
    summary.device = res.device;
    summary.stats = res.stats;
    parts->add_text("--" + b + "\r\nContent-Type: application/json\r\n\r\n" + job::result_json(engine, summary) +
                    "\r\n");
    for (std::size_t i = 0; i < outputs; ++i) {
      const job::Output& o = res.outputs[i];
      const std::string name = json::quote(o.name);  // a quoted string, control characters escaped
      parts->add_text("--" + b + "\r\nContent-Type: application/x-npy\r\nContent-Disposition: attachment; name=" +
                      name + "; filename=" + name.substr(0, name.size() - 1) + ".npy\"\r\n\r\n" + job::npy_header(o));
      parts->add_output(i);
      parts->add_text("\r\n");
    }
    parts->add_text("--" + b + "--\r\n");
  }
  r.content_length = parts->size();
  r.body = std::move(parts);
  return r;
}

}  // namespace uvcl::cli
