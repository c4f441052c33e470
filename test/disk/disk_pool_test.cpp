// The disk pool: read-only mappings, shared per file, kept mapped until every
// upload from them has completed, and uploads straight from the mapping.
#include <gtest/gtest.h>

#include <optional>

#include "program/disk_pool.hpp"
#include "st_util.hpp"
#include "uvcl/engine.hpp"

namespace uvcl::disk_pool_test {

using uvcl::disk_testing::bytes_of;
using uvcl::disk_testing::safetensors_file;
using uvcl::disk_testing::TempDir;

std::unique_ptr<Engine> make_engine() {
  Config c;
  auto e = Engine::create(c);
  EXPECT_TRUE(e.ok()) << e.error().to_string();
  if (!e.ok()) return nullptr;
  return std::move(e.value());
}

TEST(Mapping, MissingFileIsAnIoErrorNamingIt) {
  auto m = disk::Mapping::open("/nonexistent/dir/w.safetensors");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status(), Status::Io);
  EXPECT_EQ(m.error().message, "/nonexistent/dir/w.safetensors: cannot read: No such file or directory");
  disk::DiskPool pool;
  auto p = pool.safetensors("/nonexistent/w.safetensors");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status(), Status::Io);
  EXPECT_NE(p.error().message.find("/nonexistent/w.safetensors"), std::string::npos);
}

TEST(Mapping, DirectoryIsNotAFile) {
  TempDir dir;
  auto m = disk::Mapping::open(dir.path());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status(), Status::Io);
  EXPECT_EQ(m.error().message, dir.path() + ": cannot read: not a regular file (a directory)");
}

TEST(Mapping, EmptyFileMapsToNothing) {
  TempDir dir;
  const std::string path = dir.write("empty.bin", {});
  const auto live = disk::Mapping::live();
  auto m = disk::Mapping::open(path);
  ASSERT_TRUE(m.ok()) << m.error().to_string();
  EXPECT_TRUE(m.value()->bytes().empty());
  EXPECT_EQ(disk::Mapping::live(), live);
  disk::DiskPool pool;
  auto st = pool.safetensors(path, Status::InvalidJob);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status(), Status::InvalidJob);
  EXPECT_EQ(st.error().message,
            path + ": 0 bytes: too short for a safetensors file (it starts with an 8-byte header length)");
}

TEST(Mapping, ReadsTheFileAndUnmapsAtTheLastReference) {
  TempDir dir;
  const std::vector<std::uint32_t> v = {1, 2, 3, 0xdeadbeef};
  const std::string path = dir.write("v.bin", bytes_of(v));
  const auto live = disk::Mapping::live();
  disk::DiskPool pool;
  auto a = pool.map(path);
  ASSERT_TRUE(a.ok()) << a.error().to_string();
  auto b = pool.map(path);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a.value(), b.value());  // one mapping per file
  EXPECT_EQ(pool.mapped(), 1u);
  EXPECT_EQ(disk::Mapping::live(), live + 1);
  ASSERT_EQ(a.value()->bytes().size(), 16u);
  EXPECT_EQ(std::memcmp(a.value()->bytes().data(), v.data(), 16), 0);
  a.value().reset();
  EXPECT_EQ(disk::Mapping::live(), live + 1);
  b.value().reset();
  EXPECT_EQ(disk::Mapping::live(), live);
  EXPECT_EQ(pool.mapped(), 0u);
}

TEST(DiskPool, ParsesASafetensorsHeaderOncePerMapping) {
  TempDir dir;
  const std::string path = dir.write("w.safetensors", safetensors_file({{"x", "U8", {3}, bytes_of(std::vector<std::uint8_t>{1, 2, 3})}}));
  disk::DiskPool pool;
  auto f1 = pool.safetensors(path);
  ASSERT_TRUE(f1.ok()) << f1.error().to_string();
  auto f2 = pool.safetensors(path);
  ASSERT_TRUE(f2.ok());
  EXPECT_EQ(f1.value(), f2.value());
  const auto* t = f1.value()->header.find("x");
  ASSERT_NE(t, nullptr);
  auto data = f1.value()->data(*t);
  ASSERT_EQ(data.size(), 3u);
  EXPECT_EQ(static_cast<int>(data[2]), 3);
}

TEST(DiskPool, MalformedFileNamesThePath) {
  TempDir dir;
  const std::string path = dir.write("bad.safetensors", uvcl::disk_testing::raw_file(1000, "{}"));
  disk::DiskPool pool;
  auto f = pool.safetensors(path, Status::InvalidJob);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status(), Status::InvalidJob);
  EXPECT_EQ(f.error().message, path + ": header length 1000 is past the end of the file (10 bytes)");
  EXPECT_EQ(pool.mapped(), 0u);  // nothing kept for a bad file
}

class UploadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    engine_ = make_engine();
    ASSERT_TRUE(engine_);
    live_ = disk::Mapping::live();
  }
  void TearDown() override {
    engine_.reset();
    EXPECT_EQ(disk::Mapping::live(), live_) << "a mapping outlived every upload from it";
  }
  std::unique_ptr<Engine> engine_;
  std::uint64_t live_ = 0;
};

TEST_F(UploadTest, MappingStaysMappedUntilTheCopyCompletes) {
  TempDir dir;
  std::vector<float> v(1 << 18);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.25f - 7.0f;
  const std::string path = dir.write("big.safetensors", safetensors_file({{"v", "F32", {v.size()}, bytes_of(v)}}));
  auto buf = engine_->allocate(0, v.size() * 4);
  ASSERT_TRUE(buf.ok()) << buf.error().to_string();
  bool done = false;
  std::optional<bool> mapped_in_callback;
  {
    disk::DiskPool pool;
    auto f = pool.safetensors(path);
    ASSERT_TRUE(f.ok()) << f.error().to_string();
    const auto* t = f.value()->header.find("v");
    ASSERT_NE(t, nullptr);
    auto r = disk::upload(*engine_, f.value()->mapping, static_cast<std::size_t>(f.value()->header.data_offset + t->begin),
                          static_cast<std::size_t>(t->bytes()), buf.value(), 0, [&](Result<void> res) {
                            EXPECT_TRUE(res.ok()) << res.error().to_string();
                            mapped_in_callback = disk::Mapping::live() == live_ + 1;
                            done = true;
                          });
    ASSERT_TRUE(r.ok()) << r.error().to_string();
  }
  // The pool and every local reference are gone; the write holds the mapping.
  if (!done) {
    EXPECT_EQ(disk::Mapping::live(), live_ + 1);
  }
  auto back = engine_->read_sync(buf.value(), 0, v.size() * 4);
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  ASSERT_TRUE(engine_->finish().ok());
  EXPECT_TRUE(done);
  EXPECT_EQ(mapped_in_callback, true);
  EXPECT_EQ(disk::Mapping::live(), live_);  // unmapped once the write was final
  ASSERT_EQ(back->size(), v.size() * 4);
  EXPECT_EQ(std::memcmp(back->data(), v.data(), back->size()), 0);
}

TEST_F(UploadTest, ManyUploadsFromOneMapping) {
  TempDir dir;
  std::vector<std::int32_t> v(4096);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::int32_t>(i * 2654435761u);
  const std::string path = dir.write("v.bin", bytes_of(v));
  auto m = disk::Mapping::open(path);
  ASSERT_TRUE(m.ok());
  auto buf = engine_->allocate(0, v.size() * 4);
  ASSERT_TRUE(buf.ok());
  int completions = 0;
  // Eight slices, uploaded in reverse order into their own places.
  for (int k = 7; k >= 0; --k) {
    const std::size_t off = static_cast<std::size_t>(k) * 2048;
    ASSERT_TRUE(disk::upload(*engine_, m.value(), off, 2048, buf.value(), off, [&](Result<void> r) {
                  EXPECT_TRUE(r.ok());
                  ++completions;
                }).ok());
  }
  m.value().reset();
  auto back = engine_->read_sync(buf.value(), 0, v.size() * 4);
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  ASSERT_TRUE(engine_->finish().ok());
  EXPECT_EQ(completions, 8);
  EXPECT_EQ(disk::Mapping::live(), live_);
  EXPECT_EQ(std::memcmp(back->data(), v.data(), back->size()), 0);
}

TEST_F(UploadTest, RejectedUploadNeverCallsBackAndReleasesTheMapping) {
  TempDir dir;
  const std::string path = dir.write("v.bin", std::vector<std::byte>(64));
  auto m = disk::Mapping::open(path);
  ASSERT_TRUE(m.ok());
  auto buf = engine_->allocate(0, 32);
  ASSERT_TRUE(buf.ok());
  bool called = false;
  // Outside the file.
  auto r1 = disk::upload(*engine_, m.value(), 48, 32, buf.value(), 0, [&](Result<void>) { called = true; });
  ASSERT_FALSE(r1.ok());
  EXPECT_EQ(r1.status(), Status::InvalidArgument);
  EXPECT_EQ(r1.error().message, path + ": upload of bytes [48, 48 + 32) is outside the file (64 bytes)");
  // Outside the buffer: the engine refuses, the error names the file.
  auto r2 = disk::upload(*engine_, m.value(), 0, 64, buf.value(), 0, [&](Result<void>) { called = true; });
  ASSERT_FALSE(r2.ok());
  EXPECT_EQ(r2.error().message.rfind(path + ": write: ", 0), 0u) << r2.error().message;
  // A released buffer.
  ASSERT_TRUE(engine_->release(buf.value()).ok());
  auto r3 = disk::upload(*engine_, m.value(), 0, 16, buf.value(), 0, [&](Result<void>) { called = true; });
  ASSERT_FALSE(r3.ok());
  m.value().reset();
  EXPECT_EQ(disk::Mapping::live(), live_);
  ASSERT_TRUE(engine_->finish().ok());
  EXPECT_FALSE(called);
}

TEST_F(UploadTest, EngineTeardownCancelsPendingUploadsAndUnmaps) {
  TempDir dir;
  const std::string path = dir.write("v.bin", std::vector<std::byte>(1 << 16));
  auto m = disk::Mapping::open(path);
  ASSERT_TRUE(m.ok());
  auto buf = engine_->allocate(0, 1 << 16);
  ASSERT_TRUE(buf.ok());
  int calls = 0;
  ASSERT_TRUE(disk::upload(*engine_, m.value(), 0, 1 << 16, buf.value(), 0, [&](Result<void>) { ++calls; }).ok());
  m.value().reset();
  EXPECT_EQ(disk::Mapping::live(), live_ + 1);
  engine_.reset();  // the write never left its window, or completes in teardown
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(disk::Mapping::live(), live_);
}

}  // namespace uvcl::disk_pool_test
