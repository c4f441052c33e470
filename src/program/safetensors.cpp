#include "program/safetensors.hpp"

#include <simdjson.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <unordered_set>

#include "json/json_util.hpp"

namespace uvcl::safetensors {

namespace {

namespace od = simdjson::ondemand;

struct DTypeRow {
  DType type;
  std::string_view name;
  std::size_t size;
};

constexpr DTypeRow kDTypes[] = {
    {DType::Bool, "BOOL", 1},       {DType::U8, "U8", 1},   {DType::I8, "I8", 1},   {DType::F8_E5M2, "F8_E5M2", 1},
    {DType::F8_E4M3, "F8_E4M3", 1}, {DType::I16, "I16", 2}, {DType::U16, "U16", 2}, {DType::F16, "F16", 2},
    {DType::BF16, "BF16", 2},       {DType::I32, "I32", 4}, {DType::U32, "U32", 4}, {DType::F32, "F32", 4},
    {DType::F64, "F64", 8},         {DType::I64, "I64", 8}, {DType::U64, "U64", 8},
};

const DTypeRow& row(DType t) noexcept {
  for (const DTypeRow& r : kDTypes)
    if (r.type == t) return r;
  return kDTypes[0];
}

bool mul_overflows(std::uint64_t a, std::uint64_t b, std::uint64_t& out) noexcept {
  return __builtin_mul_overflow(a, b, &out);
}

std::string offsets_text(std::uint64_t begin, std::uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
}

// Reads one header document. Every message reads "<origin>: <where>: <what>".
class HeaderParser {
 public:
  HeaderParser(std::string_view origin, Status status) : origin_(origin), status_(status) {}

  Result<Header> run(std::string_view json, std::uint64_t data_offset, std::uint64_t data_size);

 private:
  Error fail(std::string_view where, std::string_view what) const {
    std::string m = origin_ + ": ";
    if (!where.empty()) m += std::string(where) + ": ";
    return Error{status_, m + std::string(what)};
  }
  // A value of the wrong kind ("expected a string, got 5"), or broken JSON.
  Error mismatch(std::string_view where, std::string_view expected, simdjson::error_code code, std::string_view token) {
    if (code == simdjson::INCORRECT_TYPE || code == simdjson::NUMBER_OUT_OF_RANGE)
      return fail(where, "expected " + std::string(expected) + ", got " + json::describe_token(token));
    return syntax(code);
  }
  // The position comes from the document only once iterate() has succeeded:
  // before that the document holds no iterator and current_location() would
  // read through a null pointer. Scan errors are located in the text instead.
  Error syntax(simdjson::error_code code) {
    std::string at;
    std::optional<std::size_t> pos;
    if (doc_ready_) {
      const char* p = nullptr;
      if (!doc_.current_location().get(p) && p >= input_.data() && p <= input_.data() + input_.size())
        pos = static_cast<std::size_t>(p - input_.data());
    } else {
      pos = json::locate_scan_error(std::string_view(input_.data(), input_.size()), code);
    }
    if (pos) at = " at byte " + std::to_string(*pos) + " of the header";
    return fail("", "malformed JSON header" + at + ": " + simdjson::error_message(code));
  }
  static std::string_view token(od::value& v) noexcept {
    return v.raw_json_token();
  }

  Result<void> read_u64(od::value& v, std::string_view where, std::string_view what, std::uint64_t& out) {
    const std::string_view t = token(v);
    if (auto e = v.get_uint64().get(out)) return mismatch(where, what, e, t);
    return {};
  }
  Result<void> read_metadata(od::value& v, Header& h);
  Result<void> read_tensor(od::value& v, TensorInfo& t, std::uint64_t data_size);

  std::string origin_;
  Status status_;
  simdjson::padded_string input_;
  od::parser parser_;
  od::document doc_;
  bool doc_ready_ = false;  // iterate() succeeded: doc_ may be asked for a location
};

Result<void> HeaderParser::read_metadata(od::value& v, Header& h) {
  const std::string where = "\"__metadata__\"";
  od::object obj;
  const std::string_view t = token(v);
  if (auto e = v.get_object().get(obj)) return mismatch(where, "an object of strings", e, t);
  std::unordered_set<std::string> seen;
  for (auto item : obj) {
    od::field f;
    if (auto e = std::move(item).get(f)) return syntax(e);
    std::string_view key;
    if (auto e = f.unescaped_key().get(key)) return syntax(e);
    const std::string at = where + ": " + json::quote(key);
    if (!seen.insert(std::string(key)).second) return fail(at, "duplicate key");
    od::value value = f.value();
    const std::string_view vt = token(value);
    std::string_view s;
    if (auto e = value.get_string().get(s)) return mismatch(at, "a string", e, vt);
    h.metadata.emplace_back(std::string(key), std::string(s));
  }
  return {};
}

Result<void> HeaderParser::read_tensor(od::value& v, TensorInfo& t, std::uint64_t data_size) {
  const std::string where = "tensor " + json::quote(t.name);
  od::object obj;
  const std::string_view tok = token(v);
  if (auto e = v.get_object().get(obj))
    return mismatch(where, "an object with \"dtype\", \"shape\" and \"data_offsets\"", e, tok);
  bool has_dtype = false, has_shape = false, has_offsets = false;
  for (auto item : obj) {
    od::field f;
    if (auto e = std::move(item).get(f)) return syntax(e);
    std::string_view key;
    if (auto e = f.unescaped_key().get(key)) return syntax(e);
    od::value value = f.value();
    const std::string at = where + ": " + std::string(key);
    if (key == "dtype" || key == "shape" || key == "data_offsets") {
      bool& seen = key == "dtype" ? has_dtype : key == "shape" ? has_shape : has_offsets;
      if (seen) return fail(at, "duplicate key");
      seen = true;
    }
    if (key == "dtype") {
      const std::string_view vt = token(value);
      std::string_view s;
      if (auto e = value.get_string().get(s)) return mismatch(at, "a dtype string such as \"F32\"", e, vt);
      auto d = dtype_from_name(s);
      if (!d) {
        std::string known;
        for (const DTypeRow& r : kDTypes) known += (known.empty() ? "" : ", ") + std::string(r.name);
        return fail(at, "unknown dtype " + json::quote(s) + " (known: " + known + ")");
      }
      t.dtype = *d;
    } else if (key == "shape") {
      od::array arr;
      const std::string_view vt = token(value);
      if (auto e = value.get_array().get(arr)) return mismatch(at, "an array of dimensions", e, vt);
      std::size_t i = 0;
      for (auto item2 : arr) {
        od::value dim;
        if (auto e = item2.get(dim)) return syntax(e);
        std::uint64_t n = 0;
        UVCL_TRY(read_u64(dim, at + "[" + std::to_string(i) + "]", "a non-negative integer", n));
        t.shape.push_back(n);
        ++i;
      }
    } else if (key == "data_offsets") {
      od::array arr;
      const std::string_view vt = token(value);
      if (auto e = value.get_array().get(arr)) return mismatch(at, "an array [begin, end]", e, vt);
      std::uint64_t off[2] = {0, 0};
      std::size_t i = 0;
      for (auto item2 : arr) {
        od::value x;
        if (auto e = item2.get(x)) return syntax(e);
        if (i >= 2) return fail(at, "expected two offsets [begin, end], got more");
        UVCL_TRY(read_u64(x, at + "[" + std::to_string(i) + "]", "a non-negative byte offset", off[i]));
        ++i;
      }
      if (i != 2) return fail(at, "expected two offsets [begin, end], got " + std::to_string(i));
      t.begin = off[0];
      t.end = off[1];
    }
    // Other keys are ignored, as the reference implementation does.
  }
  if (!has_dtype) return fail(where, "missing \"dtype\"");
  if (!has_shape) return fail(where, "missing \"shape\"");
  if (!has_offsets) return fail(where, "missing \"data_offsets\"");

  const std::string offs = "data_offsets " + offsets_text(t.begin, t.end);
  if (t.begin > t.end) return fail(where, offs + ": begin is after end");
  if (t.end > data_size)
    return fail(where, offs + " past the end of the data (" + std::to_string(data_size) + " bytes)");
  std::uint64_t n = 1;
  for (std::uint64_t d : t.shape)
    if (mul_overflows(n, d, n))
      return fail(where, "shape " + shape_text(t.shape) + " has more elements than 64 bits count");
  std::uint64_t need = 0;
  if (mul_overflows(n, dtype_size(t.dtype), need) || need != t.bytes())
    return fail(where, offs + " hold " + std::to_string(t.bytes()) + " bytes, but shape " + shape_text(t.shape) +
                           " of " + std::string(dtype_name(t.dtype)) + " needs " +
                           (need == 0 && n != 0 ? std::string("more than 2^64") : std::to_string(need)));
  return {};
}

Result<Header> HeaderParser::run(std::string_view json, std::uint64_t data_offset, std::uint64_t data_size) {
  Header h;
  h.data_offset = data_offset;
  h.data_size = data_size;
  // Anything but an object is refused before simdjson sees it (a scalar
  // document cannot be read as a value On-Demand).
  const std::size_t lead = json.find_first_not_of(" \t\r\n");
  if (lead == std::string_view::npos || json[lead] != '{')
    return fail("", "the header is not a JSON object (got " +
                        json::describe_token(lead == std::string_view::npos ? std::string_view{} : json.substr(lead)) +
                        ")");
  input_ = simdjson::padded_string(json);
  if (auto e = parser_.iterate(input_).get(doc_)) return syntax(e);
  doc_ready_ = true;
  od::object top;
  {
    od::value root;
    if (auto e = doc_.get_value().get(root)) return syntax(e);
    const std::string_view t = token(root);
    if (auto e = root.get_object().get(top)) {
      if (e == simdjson::INCORRECT_TYPE)
        return fail("", "the header is not a JSON object (got " + json::describe_token(t) + ")");
      return syntax(e);
    }
  }
  std::unordered_set<std::string> names;
  bool has_metadata = false;
  for (auto item : top) {
    od::field f;
    if (auto e = std::move(item).get(f)) return syntax(e);
    std::string_view key;
    if (auto e = f.unescaped_key().get(key)) return syntax(e);
    od::value value = f.value();
    if (key == "__metadata__") {
      if (has_metadata) return fail("\"__metadata__\"", "duplicate key");
      has_metadata = true;
      UVCL_TRY(read_metadata(value, h));
      continue;
    }
    if (!names.insert(std::string(key)).second) return fail("tensor " + json::quote(key), "duplicate tensor name");
    TensorInfo t;
    t.name = std::string(key);
    UVCL_TRY(read_tensor(value, t, data_size));
    h.tensors.push_back(std::move(t));
  }
  const char* rest = nullptr;
  if (!doc_.current_location().get(rest))
    return fail("", "trailing content after the header object at byte " + std::to_string(rest - input_.data()) +
                        " of the header");

  // No two tensors may share a byte (empty tensors share none).
  std::vector<const TensorInfo*> order;
  for (const TensorInfo& t : h.tensors)
    if (t.bytes() > 0) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  for (std::size_t i = 1; i < order.size(); ++i)
    if (order[i]->begin < order[i - 1]->end)
      return fail("tensor " + json::quote(order[i]->name),
                  "data_offsets " + offsets_text(order[i]->begin, order[i]->end) + " overlap tensor " +
                      json::quote(order[i - 1]->name) + " " + offsets_text(order[i - 1]->begin, order[i - 1]->end));
  return h;
}

}  // namespace

std::size_t dtype_size(DType t) noexcept { return row(t).size; }
std::string_view dtype_name(DType t) noexcept { return row(t).name; }

std::optional<DType> dtype_from_name(std::string_view name) noexcept {
  for (const DTypeRow& r : kDTypes)
    if (r.name == name) return r.type;
  return std::nullopt;
}

std::optional<ScalarType> scalar_type_of(DType t) noexcept {
  switch (t) {
    case DType::Bool:
    case DType::U8: return ScalarType::UChar;
    case DType::I8: return ScalarType::Char;
    case DType::I16: return ScalarType::Short;
    case DType::U16: return ScalarType::UShort;
    case DType::F16: return ScalarType::Half;
    case DType::I32: return ScalarType::Int;
    case DType::U32: return ScalarType::UInt;
    case DType::F32: return ScalarType::Float;
    case DType::F64: return ScalarType::Double;
    case DType::I64: return ScalarType::Long;
    case DType::U64: return ScalarType::ULong;
    case DType::BF16:
    case DType::F8_E5M2:
    case DType::F8_E4M3: return std::nullopt;
  }
  return std::nullopt;
}

std::uint64_t TensorInfo::elements() const noexcept {
  std::uint64_t n = 1;
  for (std::uint64_t d : shape) n *= d;  // parse() checked it does not overflow
  return n;
}

const TensorInfo* Header::find(std::string_view name) const noexcept {
  for (const TensorInfo& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

std::string shape_text(const std::vector<std::uint64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Result<Header> parse(std::span<const std::byte> file, std::string_view origin, Status status) {
  const std::string o(origin);
  if (file.size() < 8)
    return Error{status, o + ": " + std::to_string(file.size()) +
                             " bytes: too short for a safetensors file (it starts with an 8-byte header length)"};
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<std::uint8_t>(file[static_cast<std::size_t>(i)]);
  const std::uint64_t room = file.size() - 8;
  if (n == 0) return Error{status, o + ": header length is 0 (the JSON header is missing)"};
  if (n > room)
    return Error{status, o + ": header length " + std::to_string(n) + " is past the end of the file (" +
                             std::to_string(file.size()) + " bytes)"};
  if (n > kMaxHeaderBytes)
    return Error{status, o + ": header length " + std::to_string(n) + " exceeds the limit of " +
                             std::to_string(kMaxHeaderBytes) + " bytes"};
  const std::string_view json(reinterpret_cast<const char*>(file.data()) + 8, static_cast<std::size_t>(n));
  HeaderParser p(origin, status);
  return p.run(json, 8 + n, room - n);
}

}  // namespace uvcl::safetensors
