// Shared fixture for end-to-end engine tests on PoCL.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "uvcl/engine.hpp"

namespace uvcl::testing {

// a[i] *= 2 for i < n: a kernel whose result shows that it ran, and how often.
inline constexpr const char* kTwiceKernel = R"CL(
__kernel void twice(__global int* a, uint n) {
  size_t i = get_global_id(0);
  if (i < n) a[i] *= 2;
}
)CL";

inline Config test_config(unsigned queues = 8, unsigned window = 100) {
  Config c;
  c.queues = queues;
  c.window = window;
  return c;
}

template <class T>
std::span<const std::byte> bytes_of(const std::vector<T>& v) {
  return std::as_bytes(std::span<const T>(v));
}

template <class T>
std::vector<T> as_vector(const std::vector<std::byte>& b) {
  std::vector<T> out(b.size() / sizeof(T));
  std::memcpy(out.data(), b.data(), out.size() * sizeof(T));
  return out;
}

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override { make_engine(test_config()); }
  void make_engine(const Config& c) {
    engine_.reset();
    auto e = Engine::create(c);
    ASSERT_TRUE(e.ok()) << e.error().to_string();
    engine_ = std::move(e.value());
    ASSERT_GE(engine_->device_count(), 1u) << "no OpenCL device (PoCL expected)";
  }
  Engine& eng() { return *engine_; }

  Program compile(const std::string& src, std::size_t device = 0) {
    auto p = engine_->compile_sync(device, src);
    EXPECT_TRUE(p.ok()) << p.error().to_string();
    return p.ok() ? p.value() : Program{};
  }
  Kernel kernel(Program p, const std::string& entry) {
    auto k = engine_->kernel(p, entry);
    EXPECT_TRUE(k.ok()) << k.error().to_string();
    return k.ok() ? k.value() : Kernel{};
  }
  template <class T>
  Buffer upload(const std::vector<T>& v, std::size_t device = 0) {
    auto b = engine_->allocate(device, v.size() * sizeof(T));
    EXPECT_TRUE(b.ok()) << b.error().to_string();
    if (!b.ok()) return Buffer{};
    auto w = engine_->write(b.value(), 0, bytes_of(v));
    EXPECT_TRUE(w.ok()) << w.error().to_string();
    return b.value();
  }
  template <class T>
  std::vector<T> download(Buffer b, std::size_t count) {
    auto r = engine_->read_sync(b, 0, count * sizeof(T));
    EXPECT_TRUE(r.ok()) << r.error().to_string();
    return r.ok() ? as_vector<T>(r.value()) : std::vector<T>{};
  }

  std::unique_ptr<Engine> engine_;
};

}  // namespace uvcl::testing
