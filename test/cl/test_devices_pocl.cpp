// Enumeration and device info against the real ICD loader and PoCL.
//
// PoCL reads POCL_DEVICES and ocl-icd reads OCL_ICD_VENDORS once, when the
// loader first initialises; this process has done that long before a test
// runs. Cases that need other settings re-run this binary (a child process
// with its own environment) on the disabled helper test ClDevicesChild and
// read what it prints.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../child_process.hpp"
#include "cl/devices.hpp"
#include "program/device_json.hpp"

namespace cl_devices_pocl_test {

namespace child_process = uvcl::testing::child_process;
using child_process::kChildMarker;

using uvcl::DeviceType;
using uvcl::Status;
using uvcl::cl::Device;
using uvcl::cl::enumerate_devices;
using uvcl::cl::Library;

constexpr const char* kChildTest = "ClDevicesChild.DISABLED_ReportDevices";

bool is_pocl(const Device& d) {
  return d.info.platform_vendor.find("pocl") != std::string::npos ||
         d.info.platform_name.find("Portable Computing Language") != std::string::npos;
}

// Runs this test binary on kChildTest with `env` added to (or replacing in)
// the current environment; a child still running after 120 s is killed.
child_process::Child run_child(const std::vector<std::pair<std::string, std::string>>& env) {
  return child_process::spawn_child(kChildTest, env, std::chrono::seconds(120));
}

// The values of "uvcl-child: key=value" lines, in order.
std::vector<std::string> child_values(const std::string& output, const std::string& key) {
  std::vector<std::string> values;
  const std::string prefix = "uvcl-child: " + key + "=";
  std::size_t pos = 0;
  while ((pos = output.find(prefix, pos)) != std::string::npos) {
    pos += prefix.size();
    const std::size_t end = output.find('\n', pos);
    values.push_back(output.substr(pos, end == std::string::npos ? std::string::npos : end - pos));
  }
  return values;
}

// Whether the helper test ran and passed: an exit code of 0 alone would also
// be what a filter that matched no test gives.
bool child_passed(const child_process::Child& child) {
  return child.exit_code == 0 && child.output.find(std::string("[       OK ] ") + kChildTest) != std::string::npos;
}

// Runs only in a child started by run_child.
TEST(ClDevicesChild, DISABLED_ReportDevices) {
  if (std::getenv(kChildMarker) == nullptr) GTEST_SKIP() << "only run as a child of another test";
  auto lib = Library::open("");
  ASSERT_TRUE(lib.ok()) << lib.error().to_string();
  auto devices = enumerate_devices((*lib)->api(), std::nullopt, true);
  if (!devices.ok()) {
    std::printf("uvcl-child: error=%s\n", devices.error().to_string().c_str());
  } else {
    std::printf("uvcl-child: devices=%zu\n", devices->size());
    for (const Device& d : *devices) {
      std::printf("uvcl-child: device=%zu %zu %d %s\n", d.info.index, d.info.platform_index, is_pocl(d) ? 1 : 0,
                  d.info.name.c_str());
    }
  }
  std::fflush(stdout);
}

class ClDevicesPocl : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = Library::open("");
    ASSERT_TRUE(opened.ok()) << opened.error().to_string();
    lib = std::move(opened).value();
  }
  const uvcl::cl::Api& api() const { return lib->api(); }

  std::unique_ptr<Library> lib;
};

TEST_F(ClDevicesPocl, EnumerationFindsThePoclDevice) {
  auto devices = enumerate_devices(api(), std::nullopt, false);
  ASSERT_TRUE(devices.ok()) << devices.error().to_string();
  ASSERT_FALSE(devices->empty());
  bool found = false;
  for (std::size_t i = 0; i < devices->size(); ++i) {
    const Device& d = (*devices)[i];
    EXPECT_EQ(d.info.index, i);
    EXPECT_NE(d.id, nullptr);
    EXPECT_NE(d.platform, nullptr);
    found = found || is_pocl(d);
  }
  EXPECT_TRUE(found);
}

TEST_F(ClDevicesPocl, NoPlatformIdsGiveZeroDevices) {
  auto devices = enumerate_devices(api(), std::vector<std::size_t>{}, false);
  ASSERT_TRUE(devices.ok()) << devices.error().to_string();
  EXPECT_TRUE(devices->empty());
}

TEST_F(ClDevicesPocl, SelectingPlatformZeroGivesItsDevices) {
  auto all = enumerate_devices(api(), std::nullopt, false);
  auto zero = enumerate_devices(api(), std::vector<std::size_t>{0}, false);
  ASSERT_TRUE(all.ok() && zero.ok());
  std::size_t on_zero = 0;
  for (const Device& d : *all) on_zero += d.info.platform_index == 0 ? 1 : 0;
  EXPECT_EQ(zero->size(), on_zero);
}

TEST_F(ClDevicesPocl, AnUnknownPlatformIndexIsAnErrorNamingIt) {
  auto devices = enumerate_devices(api(), std::vector<std::size_t>{99}, false);
  ASSERT_FALSE(devices.ok());
  EXPECT_EQ(devices.status(), Status::DeviceEnumeration);
  EXPECT_NE(devices.error().message.find("99"), std::string::npos) << devices.error().message;
}

TEST_F(ClDevicesPocl, DeviceInfoIsSane) {
  auto devices = enumerate_devices(api(), std::nullopt, false);
  ASSERT_TRUE(devices.ok()) << devices.error().to_string();
  const Device* pocl = nullptr;
  for (const Device& d : *devices) {
    if (is_pocl(d)) pocl = &d;
  }
  ASSERT_NE(pocl, nullptr);
  const uvcl::DeviceInfo& info = pocl->info;
  EXPECT_FALSE(info.name.empty());
  EXPECT_FALSE(info.vendor.empty());
  EXPECT_FALSE(info.driver_version.empty());
  EXPECT_EQ(info.device_version.rfind("OpenCL ", 0), 0u) << info.device_version;
  EXPECT_EQ(info.opencl_c_version.rfind("OpenCL C ", 0), 0u) << info.opencl_c_version;
  EXPECT_EQ(info.platform_version.rfind("OpenCL ", 0), 0u) << info.platform_version;
  EXPECT_EQ(info.type, DeviceType::Cpu);
  EXPECT_EQ(info.warp_size, 1u);
  EXPECT_GT(info.compute_units, 0u);
  if (const char* limit = std::getenv("POCL_MAX_PTHREAD_COUNT")) {
    EXPECT_LE(info.compute_units, std::strtoul(limit, nullptr, 10));
  }
  EXPECT_GT(info.global_memory, 0u);
  EXPECT_GT(info.max_allocation, 0u);
  EXPECT_LE(info.max_allocation, info.global_memory);
  EXPECT_GT(info.local_memory, 0u);
  EXPECT_GT(info.preferred_float_vector_width, 0u);
  EXPECT_GT(info.profiling_timer_resolution_ns, 0u);
  EXPECT_FALSE(info.extensions.empty());
  EXPECT_EQ(info.fp16, uvcl::cl::has_extension(info.extensions, "cl_khr_fp16"));
  if (uvcl::cl::has_extension(info.extensions, "cl_khr_fp64")) {
    EXPECT_TRUE(info.fp64);
  }

  std::size_t raw_work_group = 0;
  ASSERT_EQ(api().clGetDeviceInfo(pocl->id, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof raw_work_group, &raw_work_group,
                                  nullptr),
            CL_SUCCESS);
  EXPECT_EQ(info.max_work_group_size, raw_work_group);
  EXPECT_GT(info.max_work_group_size, 0u);

  EXPECT_GE(info.max_work_item_dims, 3u);
  ASSERT_EQ(info.max_work_item_sizes.size(), info.max_work_item_dims);
  ASSERT_EQ(info.max_global_sizes.size(), info.max_work_item_dims);
  cl_uint address_bits = 0;
  ASSERT_EQ(api().clGetDeviceInfo(pocl->id, CL_DEVICE_ADDRESS_BITS, sizeof address_bits, &address_bits, nullptr),
            CL_SUCCESS);
  for (std::size_t axis = 0; axis < info.max_work_item_dims; ++axis) {
    EXPECT_GT(info.max_work_item_sizes[axis], 0u);
    EXPECT_GE(info.max_global_sizes[axis], info.max_work_item_sizes[axis]);
    if (address_bits == 64) {
      EXPECT_EQ(info.max_global_sizes[axis], UINT64_MAX);
    }
  }
}

TEST_F(ClDevicesPocl, DebugPrintsPlatformsAndDevices) {
  testing::internal::CaptureStderr();
  auto devices = enumerate_devices(api(), std::nullopt, true);
  const std::string log = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(devices.ok()) << devices.error().to_string();
  ASSERT_FALSE(devices->empty());
  EXPECT_NE(log.find("platform 0: " + (*devices)[0].info.platform_name), std::string::npos) << log;
  EXPECT_NE(log.find("device 0: " + (*devices)[0].info.name), std::string::npos) << log;
  EXPECT_NE(log.find("global memory"), std::string::npos) << log;
}

TEST_F(ClDevicesPocl, DeviceInfoJsonParsesAndNamesTheDevice) {
  auto devices = enumerate_devices(api(), std::nullopt, false);
  ASSERT_TRUE(devices.ok()) << devices.error().to_string();
  ASSERT_FALSE(devices->empty());
  const uvcl::DeviceInfo& info = (*devices)[0].info;
  const std::string json = uvcl::device_info_json(info);
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(json).get(doc), simdjson::SUCCESS) << json;
  std::string_view name, type, extensions;
  ASSERT_EQ(doc["name"].get(name), simdjson::SUCCESS);
  EXPECT_EQ(name, info.name);
  ASSERT_EQ(doc["type"].get(type), simdjson::SUCCESS);
  EXPECT_EQ(type, "cpu");
  ASSERT_EQ(doc["extensions"].get(extensions), simdjson::SUCCESS);
  EXPECT_EQ(extensions, info.extensions);
  std::uint64_t work_group = 0;
  ASSERT_EQ(doc["max_work_group_size"].get(work_group), simdjson::SUCCESS);
  EXPECT_EQ(work_group, info.max_work_group_size);
  simdjson::dom::array sizes;
  ASSERT_EQ(doc["max_work_item_sizes"].get(sizes), simdjson::SUCCESS);
  EXPECT_EQ(sizes.size(), info.max_work_item_dims);
}

TEST(ClDevicesPoclChild, TwoPthreadDevicesOnOnePlatform) {
  const child_process::Child child = run_child({{"POCL_DEVICES", "pthread pthread"}});
  ASSERT_TRUE(child_passed(child)) << child.output;
  const std::vector<std::string> count = child_values(child.output, "devices");
  ASSERT_EQ(count.size(), 1u) << "the helper test did not run:\n" << child.output;
  const std::vector<std::string> devices = child_values(child.output, "device");
  std::size_t pocl_devices = 0;
  std::size_t platform_of_first = 0;
  for (const std::string& d : devices) {
    // "<index> <platform index> <is pocl> <name>"
    std::size_t index = 0, platform = 0;
    int pocl = 0;
    ASSERT_EQ(std::sscanf(d.c_str(), "%zu %zu %d", &index, &platform, &pocl), 3) << d;
    if (pocl == 0) continue;
    if (pocl_devices++ == 0) platform_of_first = platform;
    EXPECT_EQ(platform, platform_of_first) << child.output;
  }
  EXPECT_EQ(pocl_devices, 2u) << child.output;
}

TEST(ClDevicesPoclChild, NoVendorsGiveZeroDevicesAndNoError) {
  const child_process::Child child = run_child({{"OCL_ICD_VENDORS", "/nonexistent"}});
  ASSERT_TRUE(child_passed(child)) << child.output;
  EXPECT_EQ(child_values(child.output, "error"), std::vector<std::string>{}) << child.output;
  EXPECT_EQ(child_values(child.output, "devices"), std::vector<std::string>{"0"}) << child.output;
}

}  // namespace cl_devices_pocl_test
