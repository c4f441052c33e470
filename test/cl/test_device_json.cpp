// device_info_json: every field, exact integers, and strings that survive
// any bytes a driver may return.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "cl/devices.hpp"
#include "program/device_json.hpp"

namespace cl_device_json_test {

using uvcl::DeviceInfo;
using uvcl::device_info_json;

DeviceInfo sample() {
  DeviceInfo d;
  d.index = 3;
  d.platform_index = 1;
  d.platform_name = "Platform";
  d.platform_vendor = "Vendor";
  d.platform_version = "OpenCL 3.0";
  d.name = "GPU";
  d.vendor = "V";
  d.driver_version = "580.1";
  d.device_version = "OpenCL 3.0 CUDA";
  d.opencl_c_version = "OpenCL C 1.2";
  d.type = uvcl::DeviceType::Gpu;
  d.compute_units = 132;
  d.max_clock_mhz = 1980;
  d.global_memory = UINT64_MAX;  // beyond a double's exact range on purpose
  d.max_allocation = (std::uint64_t{1} << 53) + 1;
  d.local_memory = 49152;
  d.max_work_group_size = 1024;
  d.max_work_item_dims = 3;
  d.max_work_item_sizes = {1024, 1024, 64};
  d.max_global_sizes = {UINT64_MAX, UINT64_MAX, UINT64_MAX};
  d.preferred_float_vector_width = 1;
  d.warp_size = 32;
  d.fp16 = true;
  d.fp64 = true;
  d.matrix_units = false;
  d.profiling_timer_resolution_ns = 1000;
  d.extensions = "cl_khr_fp16 cl_khr_fp64";
  return d;
}

struct Parsed {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
};

TEST(ClDeviceJson, EveryFieldWithExactValues) {
  const DeviceInfo d = sample();
  const std::string json = device_info_json(d);
  Parsed p;
  ASSERT_EQ(p.parser.parse(json).get(p.doc), simdjson::SUCCESS) << json;
  simdjson::dom::object object;
  ASSERT_EQ(p.doc.get(object), simdjson::SUCCESS);
  EXPECT_EQ(object.size(), 27u) << json;

  auto str = [&](const char* key) {
    std::string_view v;
    EXPECT_EQ(p.doc[key].get(v), simdjson::SUCCESS) << key;
    return std::string(v);
  };
  auto num = [&](const char* key) {
    std::uint64_t v = 0;
    EXPECT_EQ(p.doc[key].get(v), simdjson::SUCCESS) << key;
    return v;
  };
  auto flag = [&](const char* key) {
    bool v = false;
    EXPECT_EQ(p.doc[key].get(v), simdjson::SUCCESS) << key;
    return v;
  };
  EXPECT_EQ(num("index"), 3u);
  EXPECT_EQ(num("platform_index"), 1u);
  EXPECT_EQ(str("platform_name"), "Platform");
  EXPECT_EQ(str("platform_vendor"), "Vendor");
  EXPECT_EQ(str("platform_version"), "OpenCL 3.0");
  EXPECT_EQ(str("name"), "GPU");
  EXPECT_EQ(str("vendor"), "V");
  EXPECT_EQ(str("driver_version"), "580.1");
  EXPECT_EQ(str("device_version"), "OpenCL 3.0 CUDA");
  EXPECT_EQ(str("opencl_c_version"), "OpenCL C 1.2");
  EXPECT_EQ(str("type"), "gpu");
  EXPECT_EQ(num("compute_units"), 132u);
  EXPECT_EQ(num("max_clock_mhz"), 1980u);
  EXPECT_EQ(num("global_memory"), UINT64_MAX);
  EXPECT_EQ(num("max_allocation"), (std::uint64_t{1} << 53) + 1);
  EXPECT_EQ(num("local_memory"), 49152u);
  EXPECT_EQ(num("max_work_group_size"), 1024u);
  EXPECT_EQ(num("max_work_item_dims"), 3u);
  EXPECT_EQ(num("preferred_float_vector_width"), 1u);
  EXPECT_EQ(num("warp_size"), 32u);
  EXPECT_TRUE(flag("fp16"));
  EXPECT_TRUE(flag("fp64"));
  EXPECT_FALSE(flag("matrix_units"));
  EXPECT_EQ(num("profiling_timer_resolution_ns"), 1000u);
  EXPECT_EQ(str("extensions"), "cl_khr_fp16 cl_khr_fp64");

  simdjson::dom::array sizes, globals;
  ASSERT_EQ(p.doc["max_work_item_sizes"].get(sizes), simdjson::SUCCESS);
  ASSERT_EQ(p.doc["max_global_sizes"].get(globals), simdjson::SUCCESS);
  std::vector<std::uint64_t> got;
  for (auto v : sizes) got.push_back(v.get_uint64().value_unsafe());
  EXPECT_EQ(got, (std::vector<std::uint64_t>{1024, 1024, 64}));
  got.clear();
  for (auto v : globals) got.push_back(v.get_uint64().value_unsafe());
  EXPECT_EQ(got, std::vector<std::uint64_t>(3, UINT64_MAX));
}

TEST(ClDeviceJson, EmptyArraysAndStrings) {
  const std::string json = device_info_json(DeviceInfo{});
  Parsed p;
  ASSERT_EQ(p.parser.parse(json).get(p.doc), simdjson::SUCCESS) << json;
  simdjson::dom::array sizes;
  ASSERT_EQ(p.doc["max_work_item_sizes"].get(sizes), simdjson::SUCCESS);
  EXPECT_EQ(sizes.size(), 0u);
  std::string_view type;
  ASSERT_EQ(p.doc["type"].get(type), simdjson::SUCCESS);
  EXPECT_EQ(type, "other");
}

std::string round_trip(const std::string& name) {
  DeviceInfo d;
  d.name = name;
  const std::string json = device_info_json(d);
  Parsed p;
  std::string_view out;
  if (p.parser.parse(json).get(p.doc) != simdjson::SUCCESS || p.doc["name"].get(out) != simdjson::SUCCESS) {
    return "<invalid JSON: " + json + ">";
  }
  return std::string(out);
}

TEST(ClDeviceJson, StringsAreEscaped) {
  EXPECT_EQ(round_trip("a \"quoted\" \\ name"), "a \"quoted\" \\ name");
  EXPECT_EQ(round_trip("tab\tnew\nline\rcr\bbs\fff"), "tab\tnew\nline\rcr\bbs\fff");
  EXPECT_EQ(round_trip(std::string("nul\0ctl\x01\x1f\x7f", 10)), std::string("nul\0ctl\x01\x1f\x7f", 10));
  EXPECT_EQ(round_trip("/slash"), "/slash");
}

TEST(ClDeviceJson, ValidUtf8PassesThrough) {
  EXPECT_EQ(round_trip("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF"),
            "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF");
}

TEST(ClDeviceJson, InvalidUtf8BecomesReplacementCharacters) {
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(round_trip("a\xFF" "b"), "a" + fffd + "b");
  EXPECT_EQ(round_trip("trunc\xE2\x82"), "trunc" + fffd + fffd);
  EXPECT_EQ(round_trip("\xC0\xAF"), fffd + fffd);              // overlong
  EXPECT_EQ(round_trip("\xE0\x80\xAF"), fffd + fffd + fffd);   // overlong
  EXPECT_EQ(round_trip("\xED\xA0\x80"), fffd + fffd + fffd);   // surrogate
  EXPECT_EQ(round_trip("\xF4\x90\x80\x80"), fffd + fffd + fffd + fffd);  // > U+10FFFF
  EXPECT_EQ(round_trip("\x80" "x"), fffd + "x");               // lone continuation
}

}  // namespace cl_device_json_test
