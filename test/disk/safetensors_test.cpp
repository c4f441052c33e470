// The safetensors header reader: layout, dtypes, and every malformed-file
// error with its message.
#include <gtest/gtest.h>

#include <simdjson.h>
#include <sys/mman.h>

#include "program/safetensors.hpp"
#include "st_util.hpp"

namespace uvcl::safetensors_test {

using namespace uvcl::safetensors;
using uvcl::disk_testing::bytes_of;
using uvcl::disk_testing::raw_file;
using uvcl::disk_testing::safetensors_file;
using uvcl::disk_testing::with_header;

Result<Header> parse_bytes(const std::vector<std::byte>& file, Status status = Status::InvalidArgument) {
  return parse(std::span<const std::byte>(file), "w.safetensors", status);
}

// The message of the error parsing `file` gives (fails the test if it parses).
std::string error_of(const std::vector<std::byte>& file) {
  auto h = parse_bytes(file);
  EXPECT_FALSE(h.ok()) << "parsed, expected an error";
  if (h.ok()) return {};
  EXPECT_EQ(h.status(), Status::InvalidArgument);
  return h.error().message;
}

std::string header_error(const std::string& header, std::size_t data_bytes = 0) {
  return error_of(with_header(header, std::vector<std::byte>(data_bytes)));
}

TEST(Safetensors, ParsesTensorsInOrderWithMetadata) {
  const std::vector<float> a = {1, 2, 3, 4, 5, 6};
  const std::vector<std::int32_t> b = {7, 8};
  const auto file = safetensors_file({{"layer.0.weight", "F32", {2, 3}, bytes_of(a)}, {"b", "I32", {2}, bytes_of(b)}},
                                     R"({"format":"pt","author":"me"})");
  auto h = parse_bytes(file);
  ASSERT_TRUE(h.ok()) << h.error().to_string();
  ASSERT_EQ(h->tensors.size(), 2u);
  const TensorInfo& t0 = h->tensors[0];
  EXPECT_EQ(t0.name, "layer.0.weight");
  EXPECT_EQ(t0.dtype, DType::F32);
  EXPECT_EQ(t0.shape, (std::vector<std::uint64_t>{2, 3}));
  EXPECT_EQ(t0.begin, 0u);
  EXPECT_EQ(t0.end, 24u);
  EXPECT_EQ(t0.elements(), 6u);
  EXPECT_EQ(h->tensors[1].begin, 24u);
  EXPECT_EQ(h->tensors[1].bytes(), 8u);
  EXPECT_EQ(h->data_size, 32u);
  EXPECT_EQ(h->data_offset + h->data_size, file.size());
  EXPECT_EQ(h->data_offset % 8, 0u);  // the writer padded the header
  ASSERT_EQ(h->metadata.size(), 2u);
  EXPECT_EQ(h->metadata[0], (std::pair<std::string, std::string>{"format", "pt"}));
  EXPECT_EQ(h->metadata[1], (std::pair<std::string, std::string>{"author", "me"}));
  ASSERT_NE(h->find("b"), nullptr);
  EXPECT_EQ(h->find("b")->dtype, DType::I32);
  EXPECT_EQ(h->find("nope"), nullptr);
  // The tensor's bytes are where the offsets say.
  EXPECT_EQ(std::memcmp(file.data() + h->data_offset + t0.begin, a.data(), 24), 0);
}

TEST(Safetensors, EmptyHeaderScalarsAndZeroSizedTensors) {
  auto h = parse_bytes(with_header("{}"));
  ASSERT_TRUE(h.ok()) << h.error().to_string();
  EXPECT_TRUE(h->tensors.empty());
  const auto file = safetensors_file({{"s", "F64", {}, std::vector<std::byte>(8)},
                                      {"e", "F32", {0, 4}, {}},
                                      {"e2", "U8", {3, 0}, {}}});
  auto h2 = parse_bytes(file);
  ASSERT_TRUE(h2.ok()) << h2.error().to_string();
  EXPECT_EQ(h2->find("s")->elements(), 1u);
  EXPECT_EQ(h2->find("e")->elements(), 0u);
  EXPECT_EQ(h2->find("e2")->bytes(), 0u);
}

TEST(Safetensors, IgnoresUnknownKeysAndAllowsGapsAndWhitespace) {
  auto h = parse_bytes(with_header(
      " \n{ \"a\" : {\"shape\": [2], \"extra\": {\"x\": [1, 2]}, \"dtype\": \"U16\", \"data_offsets\": [4, 8]} }   ",
      std::vector<std::byte>(16)));
  ASSERT_TRUE(h.ok()) << h.error().to_string();
  EXPECT_EQ(h->tensors[0].begin, 4u);
  EXPECT_EQ(h->data_size, 16u);
}

TEST(Safetensors, DTypeTable) {
  struct Row {
    const char* name;
    std::size_t size;
    std::optional<ScalarType> type;
  };
  const Row rows[] = {
      {"BOOL", 1, ScalarType::UChar}, {"U8", 1, ScalarType::UChar},  {"I8", 1, ScalarType::Char},
      {"I16", 2, ScalarType::Short},  {"U16", 2, ScalarType::UShort}, {"F16", 2, ScalarType::Half},
      {"BF16", 2, std::nullopt},      {"I32", 4, ScalarType::Int},    {"U32", 4, ScalarType::UInt},
      {"F32", 4, ScalarType::Float},  {"F64", 8, ScalarType::Double}, {"I64", 8, ScalarType::Long},
      {"U64", 8, ScalarType::ULong},  {"F8_E4M3", 1, std::nullopt},   {"F8_E5M2", 1, std::nullopt},
  };
  for (const Row& r : rows) {
    auto d = dtype_from_name(r.name);
    ASSERT_TRUE(d.has_value()) << r.name;
    EXPECT_EQ(dtype_name(*d), r.name);
    EXPECT_EQ(dtype_size(*d), r.size) << r.name;
    EXPECT_EQ(scalar_type_of(*d), r.type) << r.name;
  }
  EXPECT_FALSE(dtype_from_name("f32").has_value());  // exact spelling only
  EXPECT_FALSE(dtype_from_name("F128").has_value());
}

TEST(Safetensors, ErrorsCarryTheGivenStatus) {
  auto h = parse_bytes(with_header("[]"), Status::InvalidJob);
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status(), Status::InvalidJob);
}

// --- the 8-byte header length ------------------------------------------

TEST(SafetensorsErrors, TruncatedBelowEightBytes) {
  EXPECT_EQ(error_of({}), "w.safetensors: 0 bytes: too short for a safetensors file (it starts with an 8-byte header length)");
  EXPECT_EQ(error_of(std::vector<std::byte>(5)),
            "w.safetensors: 5 bytes: too short for a safetensors file (it starts with an 8-byte header length)");
}

TEST(SafetensorsErrors, HeaderLengthZero) {
  EXPECT_EQ(error_of(raw_file(0, "{}")), "w.safetensors: header length is 0 (the JSON header is missing)");
}

TEST(SafetensorsErrors, HeaderLengthPastTheEnd) {
  EXPECT_EQ(error_of(raw_file(100, "{}")), "w.safetensors: header length 100 is past the end of the file (10 bytes)");
  EXPECT_EQ(error_of(raw_file(~std::uint64_t{0}, "{}")),
            "w.safetensors: header length 18446744073709551615 is past the end of the file (10 bytes)");
}

TEST(SafetensorsErrors, HeaderLengthOverTheLimit) {
  // A file larger than the limit, without touching its pages.
  const std::size_t size = kMaxHeaderBytes + 4096;
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  auto* b = static_cast<std::byte*>(p);
  const std::uint64_t n = kMaxHeaderBytes + 1;
  for (int i = 0; i < 8; ++i) b[i] = static_cast<std::byte>((n >> (8 * i)) & 0xff);
  auto h = parse(std::span<const std::byte>(b, size), "big.safetensors");
  ::munmap(p, size);
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.error().message, "big.safetensors: header length 100000001 exceeds the limit of 100000000 bytes");
}

// --- the JSON ----------------------------------------------------------

TEST(SafetensorsErrors, NotAnObject) {
  EXPECT_EQ(header_error("[]"), "w.safetensors: the header is not a JSON object (got an array)");
  EXPECT_EQ(header_error("\"x\""), "w.safetensors: the header is not a JSON object (got \"x\")");
  EXPECT_EQ(header_error("42"), "w.safetensors: the header is not a JSON object (got 42)");
  EXPECT_EQ(header_error("   "), "w.safetensors: the header is not a JSON object (got nothing)");
}

TEST(SafetensorsErrors, MalformedAndTrailingJson) {
  EXPECT_NE(header_error("{\"a\": {").find("w.safetensors: malformed JSON header"), std::string::npos);
  EXPECT_NE(header_error("{\"a\" 1}").find("w.safetensors: malformed JSON header"), std::string::npos);
  EXPECT_NE(header_error("{} x").find("w.safetensors: "), std::string::npos);
}

// Regression (fuzzing, test/fuzz/corpus/safetensors/nul-in-string.safetensors):
// a NUL byte inside a string makes simdjson's first stage fail, before any
// document exists; the error used to ask that document for a position and
// read through a null pointer. It now names the string left open.
TEST(SafetensorsErrors, NulInsideAStringIsAClearSyntaxError) {
  std::string header = "{\"__metadata__\": {\"k\": \"v\"}, \"w\": {\"dtype\": \"F3";
  header += '\0';
  header += "i, \"shape\": [2], \"data_offsets\": [0, 8]}}";
  const std::string msg = header_error(header, 8);
  // Quotes pair up to the last one, which opens a string that never closes.
  EXPECT_EQ(msg, "w.safetensors: malformed JSON header at byte " + std::to_string(header.rfind('"')) +
                     " of the header: " + simdjson::error_message(simdjson::UNCLOSED_STRING));
}

TEST(SafetensorsErrors, OffsetsPastTheEnd) {
  EXPECT_EQ(header_error(R"({"w1": {"dtype": "F32", "shape": [25], "data_offsets": [0, 100]}})", 64),
            "w.safetensors: tensor \"w1\": data_offsets [0, 100] past the end of the data (64 bytes)");
}

TEST(SafetensorsErrors, BeginAfterEnd) {
  EXPECT_EQ(header_error(R"({"w": {"dtype": "U8", "shape": [0], "data_offsets": [8, 4]}})", 16),
            "w.safetensors: tensor \"w\": data_offsets [8, 4]: begin is after end");
}

TEST(SafetensorsErrors, OverlappingTensors) {
  EXPECT_EQ(header_error(R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},)"
                         R"( "b": {"dtype": "F32", "shape": [2], "data_offsets": [12, 20]}})",
                         32),
            "w.safetensors: tensor \"b\": data_offsets [12, 20] overlap tensor \"a\" [0, 16]");
  // Also when written in the other order, and for identical ranges.
  EXPECT_NE(header_error(R"({"b": {"dtype": "F32", "shape": [2], "data_offsets": [12, 20]},)"
                         R"( "a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})",
                         32)
                .find("overlap"),
            std::string::npos);
  EXPECT_NE(header_error(R"({"a": {"dtype": "I32", "shape": [1], "data_offsets": [0, 4]},)"
                         R"( "b": {"dtype": "U32", "shape": [1], "data_offsets": [0, 4]}})",
                         4)
                .find("overlap"),
            std::string::npos);
  // Touching is fine.
  EXPECT_TRUE(parse_bytes(with_header(R"({"a": {"dtype": "I32", "shape": [1], "data_offsets": [0, 4]},)"
                                      R"( "b": {"dtype": "U32", "shape": [1], "data_offsets": [4, 8]}})",
                                      std::vector<std::byte>(8)))
                  .ok());
}

TEST(SafetensorsErrors, UnknownDType) {
  const std::string m = header_error(R"({"w": {"dtype": "F33", "shape": [1], "data_offsets": [0, 4]}})", 4);
  EXPECT_EQ(m.rfind("w.safetensors: tensor \"w\": dtype: unknown dtype \"F33\" (known: BOOL, U8, ", 0), 0u) << m;
  EXPECT_EQ(header_error(R"({"w": {"dtype": 4, "shape": [1], "data_offsets": [0, 4]}})", 4),
            "w.safetensors: tensor \"w\": dtype: expected a dtype string such as \"F32\", got 4");
}

TEST(SafetensorsErrors, ShapeAndOffsetsDisagree) {
  EXPECT_EQ(header_error(R"({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 20]}})", 24),
            "w.safetensors: tensor \"w\": data_offsets [0, 20] hold 20 bytes, but shape [2, 3] of F32 needs 24");
  EXPECT_EQ(header_error(R"({"w": {"dtype": "F16", "shape": [], "data_offsets": [0, 4]}})", 4),
            "w.safetensors: tensor \"w\": data_offsets [0, 4] hold 4 bytes, but shape [] of F16 needs 2");
  // Shapes whose byte count overflows 64 bits.
  EXPECT_EQ(header_error(R"({"w": {"dtype": "U8", "shape": [4294967296, 4294967296], "data_offsets": [0, 4]}})", 4),
            "w.safetensors: tensor \"w\": shape [4294967296, 4294967296] has more elements than 64 bits count");
  EXPECT_EQ(header_error(R"({"w": {"dtype": "F64", "shape": [4611686018427387904], "data_offsets": [0, 4]}})", 4),
            "w.safetensors: tensor \"w\": data_offsets [0, 4] hold 4 bytes, but shape [4611686018427387904] of F64 "
            "needs more than 2^64");
}

TEST(SafetensorsErrors, DuplicateNames) {
  EXPECT_EQ(header_error(R"({"w": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},)"
                         R"( "w": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}})",
                         2),
            "w.safetensors: tensor \"w\": duplicate tensor name");
  EXPECT_EQ(header_error(R"({"__metadata__": {}, "__metadata__": {}})"),
            "w.safetensors: \"__metadata__\": duplicate key");
  EXPECT_EQ(header_error(R"({"w": {"dtype": "U8", "dtype": "U8", "shape": [1], "data_offsets": [0, 1]}})", 1),
            "w.safetensors: tensor \"w\": dtype: duplicate key");
}

TEST(SafetensorsErrors, MissingAndMistypedKeys) {
  EXPECT_EQ(header_error(R"({"w": {"shape": [1], "data_offsets": [0, 1]}})", 1),
            "w.safetensors: tensor \"w\": missing \"dtype\"");
  EXPECT_EQ(header_error(R"({"w": {"dtype": "U8", "data_offsets": [0, 1]}})", 1),
            "w.safetensors: tensor \"w\": missing \"shape\"");
  EXPECT_EQ(header_error(R"({"w": {"dtype": "U8", "shape": [1]}})", 1),
            "w.safetensors: tensor \"w\": missing \"data_offsets\"");
  EXPECT_EQ(header_error(R"({"w": [1, 2]})"),
            "w.safetensors: tensor \"w\": expected an object with \"dtype\", \"shape\" and \"data_offsets\", got an "
            "array");
  EXPECT_EQ(header_error(R"({"w": {"dtype": "U8", "shape": [-1], "data_offsets": [0, 1]}})", 1),
            "w.safetensors: tensor \"w\": shape[0]: expected a non-negative integer, got -1");
  EXPECT_EQ(header_error(R"({"w": {"dtype": "U8", "shape": [1.5], "data_offsets": [0, 1]}})", 1),
            "w.safetensors: tensor \"w\": shape[0]: expected a non-negative integer, got 1.5");
  EXPECT_EQ(header_error(R"({"w": {"dtype": "U8", "shape": 1, "data_offsets": [0, 1]}})", 1),
            "w.safetensors: tensor \"w\": shape: expected an array of dimensions, got 1");
  EXPECT_EQ(header_error(R"({"w": {"dtype": "U8", "shape": [1], "data_offsets": [0]}})", 1),
            "w.safetensors: tensor \"w\": data_offsets: expected two offsets [begin, end], got 1");
  EXPECT_EQ(header_error(R"({"w": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1, 2]}})", 2),
            "w.safetensors: tensor \"w\": data_offsets: expected two offsets [begin, end], got more");
  EXPECT_EQ(header_error(R"({"w": {"dtype": "U8", "shape": [1], "data_offsets": [0, "1"]}})", 1),
            "w.safetensors: tensor \"w\": data_offsets[1]: expected a non-negative byte offset, got \"1\"");
  EXPECT_EQ(header_error(R"({"__metadata__": {"k": 5}})"),
            "w.safetensors: \"__metadata__\": \"k\": expected a string, got 5");
  EXPECT_EQ(header_error(R"({"__metadata__": []})"),
            "w.safetensors: \"__metadata__\": expected an object of strings, got an array");
}

TEST(SafetensorsErrors, NamesWithOddCharactersAreQuoted) {
  EXPECT_EQ(header_error(R"({"a\"b\n": {"dtype": "U8", "shape": [2], "data_offsets": [0, 1]}})", 1),
            "w.safetensors: tensor \"a\\\"b\\n\": data_offsets [0, 1] hold 1 bytes, but shape [2] of U8 needs 2");
}

}  // namespace uvcl::safetensors_test
