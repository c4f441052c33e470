// Enumeration and device queries against a scripted OpenCL (a fake dispatch
// table): the paths PoCL cannot show — GPUs, vendor warp queries, failing
// queries and platforms, 32-bit devices.
#include <CL/cl_ext.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cl/devices.hpp"

namespace cl_devices_fake_test {

using uvcl::DeviceType;
using uvcl::Status;
using uvcl::cl::Api;
using uvcl::cl::enumerate_devices;
using uvcl::cl::has_extension;
using uvcl::cl::query_device_info;

struct FakeDevice {
  std::map<cl_device_info, std::vector<unsigned char>> info;
  cl_device_info failing = 0;  // this query returns fail_code
  cl_int fail_code = CL_SUCCESS;

  template <class T>
  void set(cl_device_info param, T value) {
    std::vector<unsigned char> bytes(sizeof(T));
    std::memcpy(bytes.data(), &value, sizeof(T));
    info[param] = bytes;
  }
  void set_string(cl_device_info param, const std::string& value) {
    info[param] = std::vector<unsigned char>(value.begin(), value.end());
    info[param].push_back(0);
  }
  void set_sizes(cl_device_info param, const std::vector<std::size_t>& values) {
    std::vector<unsigned char> bytes(values.size() * sizeof(std::size_t));
    std::memcpy(bytes.data(), values.data(), bytes.size());
    info[param] = bytes;
  }
};

struct FakePlatform {
  std::string name = "Fake Platform";
  cl_int device_ids_rc = CL_SUCCESS;
  cl_platform_info failing = 0;
  std::vector<FakeDevice*> devices;
};

struct World {
  cl_int platform_ids_rc = CL_SUCCESS;
  int platform_ids_calls = 0;
  std::vector<FakePlatform*> platforms;
};

World* g_world = nullptr;

cl_int copy_out(const std::vector<unsigned char>& bytes, std::size_t size, void* value, std::size_t* ret) {
  if (value != nullptr) {
    if (size < bytes.size()) return CL_INVALID_VALUE;
    std::memcpy(value, bytes.data(), bytes.size());
  }
  if (ret != nullptr) *ret = bytes.size();
  return CL_SUCCESS;
}

cl_int fake_platform_ids(cl_uint num, cl_platform_id* out, cl_uint* count) {
  ++g_world->platform_ids_calls;
  if (g_world->platform_ids_rc != CL_SUCCESS) return g_world->platform_ids_rc;
  const auto n = static_cast<cl_uint>(g_world->platforms.size());
  if (count != nullptr) *count = n;
  for (cl_uint i = 0; out != nullptr && i < num && i < n; ++i) {
    out[i] = reinterpret_cast<cl_platform_id>(g_world->platforms[i]);
  }
  return CL_SUCCESS;
}

cl_int fake_platform_info(cl_platform_id id, cl_platform_info param, std::size_t size, void* value,
                          std::size_t* ret) {
  auto* p = reinterpret_cast<FakePlatform*>(id);
  if (param == p->failing) return CL_INVALID_PLATFORM;
  std::string s;
  switch (param) {
    case CL_PLATFORM_NAME: s = p->name; break;
    case CL_PLATFORM_VENDOR: s = "Fake Vendor"; break;
    case CL_PLATFORM_VERSION: s = "OpenCL 3.0 fake"; break;
    default: return CL_INVALID_VALUE;
  }
  std::vector<unsigned char> bytes(s.begin(), s.end());
  bytes.push_back(0);
  return copy_out(bytes, size, value, ret);
}

cl_int fake_device_ids(cl_platform_id id, cl_device_type, cl_uint num, cl_device_id* out, cl_uint* count) {
  auto* p = reinterpret_cast<FakePlatform*>(id);
  if (p->device_ids_rc != CL_SUCCESS) return p->device_ids_rc;
  const auto n = static_cast<cl_uint>(p->devices.size());
  if (n == 0) return CL_DEVICE_NOT_FOUND;  // what the spec asks for
  if (count != nullptr) *count = n;
  for (cl_uint i = 0; out != nullptr && i < num && i < n; ++i) out[i] = reinterpret_cast<cl_device_id>(p->devices[i]);
  return CL_SUCCESS;
}

cl_int fake_device_info(cl_device_id id, cl_device_info param, std::size_t size, void* value, std::size_t* ret) {
  auto* d = reinterpret_cast<FakeDevice*>(id);
  if (param == d->failing) return d->fail_code;
  auto it = d->info.find(param);
  if (it == d->info.end()) return CL_INVALID_VALUE;
  return copy_out(it->second, size, value, ret);
}

Api fake_api() {
  Api api;
  api.clGetPlatformIDs = fake_platform_ids;
  api.clGetPlatformInfo = fake_platform_info;
  api.clGetDeviceIDs = fake_device_ids;
  api.clGetDeviceInfo = fake_device_info;
  api.library_path = "fake";
  return api;
}

// A GPU with no vendor extensions and no fp64.
FakeDevice make_gpu(const std::string& name = "Fake GPU") {
  FakeDevice d;
  d.set_string(CL_DEVICE_NAME, name);
  d.set_string(CL_DEVICE_VENDOR, "Fake Vendor");
  d.set_string(CL_DRIVER_VERSION, "1.2.3");
  d.set_string(CL_DEVICE_VERSION, "OpenCL 3.0 fake");
  d.set_string(CL_DEVICE_OPENCL_C_VERSION, "OpenCL C 1.2 fake");
  d.set_string(CL_DEVICE_EXTENSIONS, "cl_khr_global_int32_base_atomics");
  d.set<cl_device_type>(CL_DEVICE_TYPE, CL_DEVICE_TYPE_GPU | CL_DEVICE_TYPE_DEFAULT);
  d.set<cl_uint>(CL_DEVICE_MAX_COMPUTE_UNITS, 132);
  d.set<cl_uint>(CL_DEVICE_MAX_CLOCK_FREQUENCY, 1980);
  d.set<cl_ulong>(CL_DEVICE_GLOBAL_MEM_SIZE, cl_ulong{150} << 30);
  d.set<cl_ulong>(CL_DEVICE_MAX_MEM_ALLOC_SIZE, cl_ulong{37} << 30);
  d.set<cl_ulong>(CL_DEVICE_LOCAL_MEM_SIZE, 48 << 10);
  d.set<std::size_t>(CL_DEVICE_MAX_WORK_GROUP_SIZE, 1024);
  d.set<cl_uint>(CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS, 3);
  d.set_sizes(CL_DEVICE_MAX_WORK_ITEM_SIZES, {1024, 1024, 64});
  d.set<cl_uint>(CL_DEVICE_ADDRESS_BITS, 64);
  d.set<cl_uint>(CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT, 1);
  d.set<std::size_t>(CL_DEVICE_PROFILING_TIMER_RESOLUTION, 1000);
  return d;
}

class ClDevicesFake : public ::testing::Test {
 protected:
  void SetUp() override { g_world = &world; }
  void TearDown() override { g_world = nullptr; }

  World world;
  Api api = fake_api();
};

TEST_F(ClDevicesFake, GpuWithoutVendorQueriesGetsTheDefaults) {
  FakeDevice gpu = make_gpu();
  FakePlatform p;
  p.devices = {&gpu};
  world.platforms = {&p};
  auto devices = enumerate_devices(api, std::nullopt, false);
  ASSERT_TRUE(devices.ok()) << devices.error().to_string();
  ASSERT_EQ(devices->size(), 1u);
  const uvcl::DeviceInfo& info = (*devices)[0].info;
  EXPECT_EQ(info.name, "Fake GPU");
  EXPECT_EQ(info.platform_name, "Fake Platform");
  EXPECT_EQ(info.platform_version, "OpenCL 3.0 fake");
  EXPECT_EQ(info.type, DeviceType::Gpu);
  EXPECT_EQ(info.compute_units, 132u);
  EXPECT_EQ(info.max_clock_mhz, 1980u);
  EXPECT_EQ(info.global_memory, std::uint64_t{150} << 30);
  EXPECT_EQ(info.max_allocation, std::uint64_t{37} << 30);
  EXPECT_EQ(info.local_memory, 48u << 10);
  EXPECT_EQ(info.max_work_group_size, 1024u);
  EXPECT_EQ(info.max_work_item_sizes, (std::vector<std::size_t>{1024, 1024, 64}));
  EXPECT_EQ(info.max_global_sizes, std::vector<std::uint64_t>(3, UINT64_MAX));
  EXPECT_EQ(info.warp_size, 32u);
  EXPECT_EQ(info.profiling_timer_resolution_ns, 1000u);
  EXPECT_FALSE(info.fp16);
  EXPECT_FALSE(info.fp64);  // neither the extension nor CL_DEVICE_DOUBLE_FP_CONFIG
  EXPECT_FALSE(info.matrix_units);
  EXPECT_EQ((*devices)[0].id, reinterpret_cast<cl_device_id>(&gpu));
  EXPECT_EQ((*devices)[0].platform, reinterpret_cast<cl_platform_id>(&p));
}

TEST_F(ClDevicesFake, NvidiaWarpSizeIsQueried) {
  FakeDevice gpu = make_gpu();
  gpu.set_string(CL_DEVICE_EXTENSIONS, "cl_khr_fp64 cl_nv_device_attribute_query cl_khr_fp16");
  gpu.set<cl_uint>(CL_DEVICE_WARP_SIZE_NV, 16);  // not 32, to tell it from the default
  FakePlatform p;
  p.devices = {&gpu};
  world.platforms = {&p};
  auto info = query_device_info(api, reinterpret_cast<cl_platform_id>(&p), reinterpret_cast<cl_device_id>(&gpu));
  ASSERT_TRUE(info.ok()) << info.error().to_string();
  EXPECT_EQ(info->warp_size, 16u);
  EXPECT_TRUE(info->fp16);
  EXPECT_TRUE(info->fp64);
}

TEST_F(ClDevicesFake, AmdWavefrontWidthIsQueried) {
  FakeDevice gpu = make_gpu();
  gpu.set_string(CL_DEVICE_EXTENSIONS, "cl_amd_device_attribute_query");
  gpu.set<cl_uint>(CL_DEVICE_WAVEFRONT_WIDTH_AMD, 64);
  FakePlatform p;
  auto info = query_device_info(api, reinterpret_cast<cl_platform_id>(&p), reinterpret_cast<cl_device_id>(&gpu));
  ASSERT_TRUE(info.ok()) << info.error().to_string();
  EXPECT_EQ(info->warp_size, 64u);
}

TEST_F(ClDevicesFake, AFailingVendorQueryFallsBackToTheDefault) {
  FakeDevice gpu = make_gpu();
  gpu.set_string(CL_DEVICE_EXTENSIONS, "cl_nv_device_attribute_query");  // but no CL_DEVICE_WARP_SIZE_NV
  FakePlatform p;
  auto info = query_device_info(api, reinterpret_cast<cl_platform_id>(&p), reinterpret_cast<cl_device_id>(&gpu));
  ASSERT_TRUE(info.ok()) << info.error().to_string();
  EXPECT_EQ(info->warp_size, 32u);
}

TEST_F(ClDevicesFake, CpuAndOtherTypes) {
  FakeDevice cpu = make_gpu("cpu");
  cpu.set<cl_device_type>(CL_DEVICE_TYPE, CL_DEVICE_TYPE_CPU);
  FakeDevice acc = make_gpu("acc");
  acc.set<cl_device_type>(CL_DEVICE_TYPE, CL_DEVICE_TYPE_ACCELERATOR);
  FakeDevice custom = make_gpu("custom");
  custom.set<cl_device_type>(CL_DEVICE_TYPE, CL_DEVICE_TYPE_CUSTOM);
  FakeDevice other = make_gpu("other");
  other.set<cl_device_type>(CL_DEVICE_TYPE, CL_DEVICE_TYPE_DEFAULT);
  FakePlatform p;
  p.devices = {&cpu, &acc, &custom, &other};
  world.platforms = {&p};
  auto devices = enumerate_devices(api, std::nullopt, false);
  ASSERT_TRUE(devices.ok()) << devices.error().to_string();
  ASSERT_EQ(devices->size(), 4u);
  EXPECT_EQ((*devices)[0].info.type, DeviceType::Cpu);
  EXPECT_EQ((*devices)[0].info.warp_size, 1u);
  EXPECT_EQ((*devices)[1].info.type, DeviceType::Accelerator);
  EXPECT_EQ((*devices)[1].info.warp_size, 32u);
  EXPECT_EQ((*devices)[2].info.type, DeviceType::Custom);
  EXPECT_EQ((*devices)[3].info.type, DeviceType::Other);
  for (std::size_t i = 0; i < devices->size(); ++i) EXPECT_EQ((*devices)[i].info.index, i);
  EXPECT_STREQ(uvcl::device_type_name(DeviceType::Cpu), "cpu");
  EXPECT_STREQ(uvcl::device_type_name(DeviceType::Gpu), "gpu");
  EXPECT_STREQ(uvcl::device_type_name(DeviceType::Accelerator), "accelerator");
  EXPECT_STREQ(uvcl::device_type_name(DeviceType::Custom), "custom");
  EXPECT_STREQ(uvcl::device_type_name(DeviceType::Other), "other");
}

TEST_F(ClDevicesFake, Fp64FromTheDoubleConfigAndMatrixUnits) {
  FakeDevice gpu = make_gpu();
  gpu.set<cl_device_fp_config>(CL_DEVICE_DOUBLE_FP_CONFIG, CL_FP_FMA | CL_FP_ROUND_TO_NEAREST);
  gpu.set_string(CL_DEVICE_EXTENSIONS, "cl_intel_subgroups cl_intel_subgroup_matrix_multiply_accumulate");
  FakePlatform p;
  auto info = query_device_info(api, reinterpret_cast<cl_platform_id>(&p), reinterpret_cast<cl_device_id>(&gpu));
  ASSERT_TRUE(info.ok()) << info.error().to_string();
  EXPECT_TRUE(info->fp64);
  EXPECT_TRUE(info->matrix_units);
}

TEST_F(ClDevicesFake, A32BitDeviceLimitsTheGlobalSize) {
  FakeDevice gpu = make_gpu();
  gpu.set<cl_uint>(CL_DEVICE_ADDRESS_BITS, 32);
  gpu.set<cl_uint>(CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS, 2);
  gpu.set_sizes(CL_DEVICE_MAX_WORK_ITEM_SIZES, {256, 256});
  FakePlatform p;
  auto info = query_device_info(api, reinterpret_cast<cl_platform_id>(&p), reinterpret_cast<cl_device_id>(&gpu));
  ASSERT_TRUE(info.ok()) << info.error().to_string();
  EXPECT_EQ(info->max_work_item_dims, 2u);
  EXPECT_EQ(info->max_work_item_sizes.size(), 2u);
  EXPECT_EQ(info->max_global_sizes, std::vector<std::uint64_t>(2, 0xFFFFFFFFu));
}

TEST_F(ClDevicesFake, DriverStringsAreTrimmed) {
  FakeDevice gpu = make_gpu("   Padded Name  ");
  gpu.set_string(CL_DEVICE_EXTENSIONS, "cl_khr_fp16 ");
  FakePlatform p;
  auto info = query_device_info(api, reinterpret_cast<cl_platform_id>(&p), reinterpret_cast<cl_device_id>(&gpu));
  ASSERT_TRUE(info.ok()) << info.error().to_string();
  EXPECT_EQ(info->name, "Padded Name");
  EXPECT_EQ(info->extensions, "cl_khr_fp16");
  EXPECT_TRUE(info->fp16);
}

TEST_F(ClDevicesFake, AFailedQueryNamesTheQueryAndTheDevice) {
  FakeDevice first = make_gpu("first");
  FakeDevice second = make_gpu("second");
  second.failing = CL_DEVICE_NAME;
  second.fail_code = CL_INVALID_DEVICE;
  FakePlatform a, b;
  a.devices = {&first};
  b.devices = {&second};
  world.platforms = {&a, &b};
  auto devices = enumerate_devices(api, std::nullopt, false);
  ASSERT_FALSE(devices.ok());
  EXPECT_EQ(devices.status(), Status::DeviceQuery);
  EXPECT_EQ(devices.error().message, "clGetDeviceInfo(CL_DEVICE_NAME) on device 1: CL_INVALID_DEVICE");

  first.failing = CL_DEVICE_MAX_WORK_GROUP_SIZE;
  first.fail_code = CL_OUT_OF_RESOURCES;
  auto single = query_device_info(api, reinterpret_cast<cl_platform_id>(&a), reinterpret_cast<cl_device_id>(&first));
  ASSERT_FALSE(single.ok());
  EXPECT_EQ(single.error().message, "clGetDeviceInfo(CL_DEVICE_MAX_WORK_GROUP_SIZE) on the device: CL_OUT_OF_RESOURCES");
}

TEST_F(ClDevicesFake, AFailedPlatformQueryNamesThePlatform) {
  FakeDevice gpu = make_gpu();
  FakePlatform a, b;
  b.devices = {&gpu};
  b.failing = CL_PLATFORM_VERSION;
  world.platforms = {&a, &b};
  auto devices = enumerate_devices(api, std::nullopt, false);
  ASSERT_FALSE(devices.ok());
  EXPECT_EQ(devices.status(), Status::DeviceQuery);
  EXPECT_EQ(devices.error().message, "clGetPlatformInfo(CL_PLATFORM_VERSION) on platform 1: CL_INVALID_PLATFORM");
}

TEST_F(ClDevicesFake, PlatformNotFoundIsZeroDevices) {
  world.platform_ids_rc = CL_PLATFORM_NOT_FOUND_KHR;
  auto devices = enumerate_devices(api, std::nullopt, false);
  ASSERT_TRUE(devices.ok()) << devices.error().to_string();
  EXPECT_TRUE(devices->empty());
}

TEST_F(ClDevicesFake, ZeroPlatformsIsZeroDevicesButAnIndexIsAnError) {
  auto devices = enumerate_devices(api, std::nullopt, false);
  ASSERT_TRUE(devices.ok()) << devices.error().to_string();
  EXPECT_TRUE(devices->empty());
  auto picked = enumerate_devices(api, std::vector<std::size_t>{0}, false);
  ASSERT_FALSE(picked.ok());
  EXPECT_EQ(picked.status(), Status::DeviceEnumeration);
}

TEST_F(ClDevicesFake, OtherPlatformIdErrorsAreDeviceEnumeration) {
  world.platform_ids_rc = CL_OUT_OF_HOST_MEMORY;
  auto devices = enumerate_devices(api, std::nullopt, false);
  ASSERT_FALSE(devices.ok());
  EXPECT_EQ(devices.status(), Status::DeviceEnumeration);
  EXPECT_EQ(devices.error().message, "clGetPlatformIDs: CL_OUT_OF_HOST_MEMORY");
}

TEST_F(ClDevicesFake, EmptySelectionDoesNotTouchOpenCl) {
  world.platform_ids_rc = CL_OUT_OF_HOST_MEMORY;
  auto devices = enumerate_devices(api, std::vector<std::size_t>{}, true);
  ASSERT_TRUE(devices.ok()) << devices.error().to_string();
  EXPECT_TRUE(devices->empty());
  EXPECT_EQ(world.platform_ids_calls, 0);
}

TEST_F(ClDevicesFake, BrokenPlatformsAreSkipped) {
  FakeDevice gpu0 = make_gpu("gpu0");
  FakeDevice gpu1 = make_gpu("gpu1");
  FakePlatform none, broken, good;
  none.name = "Empty";  // no devices: CL_DEVICE_NOT_FOUND
  broken.name = "Broken";
  broken.devices = {&gpu0};
  broken.device_ids_rc = CL_OUT_OF_HOST_MEMORY;
  good.devices = {&gpu0, &gpu1};
  world.platforms = {&none, &broken, &good};

  testing::internal::CaptureStderr();
  auto devices = enumerate_devices(api, std::nullopt, true);
  const std::string log = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(devices.ok()) << devices.error().to_string();
  ASSERT_EQ(devices->size(), 2u);
  EXPECT_EQ((*devices)[0].info.name, "gpu0");
  EXPECT_EQ((*devices)[0].info.index, 0u);
  EXPECT_EQ((*devices)[0].info.platform_index, 2u);
  EXPECT_EQ((*devices)[1].info.name, "gpu1");
  EXPECT_EQ((*devices)[1].info.index, 1u);
  EXPECT_NE(log.find("Empty: skipped, clGetDeviceIDs: CL_DEVICE_NOT_FOUND"), std::string::npos) << log;
  EXPECT_NE(log.find("Broken: skipped, clGetDeviceIDs: CL_OUT_OF_HOST_MEMORY"), std::string::npos) << log;
  EXPECT_NE(log.find("device 1: gpu1"), std::string::npos) << log;

  testing::internal::CaptureStderr();
  auto quiet = enumerate_devices(api, std::nullopt, false);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  ASSERT_TRUE(quiet.ok());
}

TEST_F(ClDevicesFake, SelectedPlatformsKeepPlatformOrderAndIndexes) {
  FakeDevice gpu0 = make_gpu("gpu0");
  FakeDevice gpu1 = make_gpu("gpu1");
  FakeDevice gpu2 = make_gpu("gpu2");
  FakePlatform a, b, c;
  a.devices = {&gpu0};
  b.devices = {&gpu1};
  c.devices = {&gpu2};
  world.platforms = {&a, &b, &c};
  auto devices = enumerate_devices(api, std::vector<std::size_t>{2, 0, 2}, false);
  ASSERT_TRUE(devices.ok()) << devices.error().to_string();
  ASSERT_EQ(devices->size(), 2u);
  EXPECT_EQ((*devices)[0].info.name, "gpu0");
  EXPECT_EQ((*devices)[0].info.platform_index, 0u);
  EXPECT_EQ((*devices)[1].info.name, "gpu2");
  EXPECT_EQ((*devices)[1].info.platform_index, 2u);
  EXPECT_EQ((*devices)[1].info.index, 1u);

  auto beyond = enumerate_devices(api, std::vector<std::size_t>{1, 3}, false);
  ASSERT_FALSE(beyond.ok());
  EXPECT_EQ(beyond.status(), Status::DeviceEnumeration);
  EXPECT_NE(beyond.error().message.find("platform 3"), std::string::npos) << beyond.error().message;
}

TEST(ClHasExtension, MatchesWholeWordsOnly) {
  EXPECT_TRUE(has_extension("cl_khr_fp16", "cl_khr_fp16"));
  EXPECT_TRUE(has_extension("cl_a cl_khr_fp16 cl_b", "cl_khr_fp16"));
  EXPECT_TRUE(has_extension("cl_a cl_khr_fp16", "cl_khr_fp16"));
  EXPECT_FALSE(has_extension("cl_khr_fp16_extra cl_x", "cl_khr_fp16"));
  EXPECT_FALSE(has_extension("xcl_khr_fp16", "cl_khr_fp16"));
  EXPECT_TRUE(has_extension("cl_khr_fp16_extra cl_khr_fp16", "cl_khr_fp16"));
  EXPECT_FALSE(has_extension("", "cl_khr_fp16"));
  EXPECT_FALSE(has_extension("cl_a", ""));
}

}  // namespace cl_devices_fake_test
