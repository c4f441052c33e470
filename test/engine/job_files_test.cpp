// Files a job or a config points at: only regular files are read, never more
// than the format allows, and an unusable opencl.cache_dir is an error at
// start. Before, "file": "/dev/zero" grew memory without bound, a FIFO hung
// the job, and a cache_dir that was a file was ignored in silence.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "../watchdog.hpp"
#include "program/job_runner.hpp"
#include "engine_fixture.hpp"
#include "program/job.hpp"

namespace uvcl::job_files_test {

using uvcl::testing::Watchdog;

std::string temp(const std::string& name) { return ::testing::TempDir() + "uvcl-job-files-" + name; }

Result<job::RunResult> run(Engine& e, const std::string& json) {
  auto j = job::parse_job(json, "job.json");
  if (!j) return std::move(j).error();
  return job::run_job_sync(e, std::move(j.value()), job::RunOptions{});
}

std::string init_file_job(const std::string& path) {
  return R"({"buffers": {"a": {"type": "uint", "count": 16, "init": {"file": ")" + path +
         R"("}}}, "kernels": {}, "launches": [], "outputs": ["a"]})";
}

class JobFiles : public uvcl::testing::EngineTest {};

TEST_F(JobFiles, DeviceAsInitFileIsRefusedBeforeReading) {
  Watchdog wd("/dev/zero as an init file", 30);
  auto r = run(eng(), init_file_job("/dev/zero"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status(), Status::Io);
  EXPECT_NE(r.error().message.find(
                "buffers.a.init.file: /dev/zero: cannot read: not a regular file (a character device)"),
            std::string::npos)
      << r.error().message;
}

TEST_F(JobFiles, FifoAsInitFileDoesNotHang) {
  Watchdog wd("a FIFO as an init file", 30);
  const std::string fifo = temp("fifo");
  std::remove(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto r = run(eng(), init_file_job(fifo));
  std::remove(fifo.c_str());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("a FIFO"), std::string::npos) << r.error().message;
}

TEST_F(JobFiles, InitFileLargerThanTheBufferIsNotReadWhole) {
  const std::string big = temp("big.bin");
  std::FILE* f = std::fopen(big.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fputs(std::string(1000, 'x').c_str(), f);
  std::fclose(f);
  auto r = run(eng(), init_file_job(big));
  std::remove(big.c_str());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("larger than 64 bytes"), std::string::npos) << r.error().message;
}

TEST_F(JobFiles, DirectoryAsKernelFileIsRefused) {
  const std::string json = R"({"buffers": {}, "kernels": {"k": {"file": "/tmp"}}, "launches": [], "outputs": []})";
  auto r = run(eng(), json);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("kernels.k.file: /tmp: cannot read: not a regular file (a directory)"),
            std::string::npos)
      << r.error().message;
}

TEST(CacheDir, UnusableIsAnErrorAtStart) {
  const std::string file = temp("cache-is-a-file");
  std::FILE* f = std::fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  Config c = uvcl::testing::test_config();
  c.cache_dir = file;
  auto e = Engine::create(c);
  std::remove(file.c_str());
  ASSERT_FALSE(e.ok()) << "a cache_dir that is a file was ignored";
  EXPECT_EQ(e.status(), Status::Io);
  EXPECT_NE(e.error().message.find("opencl.cache_dir: " + file + ": not a directory"), std::string::npos)
      << e.error().message;

  c.cache_dir = temp("no-such-parent") + "/cache";
  e = Engine::create(c);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("cannot create"), std::string::npos) << e.error().message;

  // A missing folder whose parent exists is made.
  c.cache_dir = temp("fresh-cache");
  ::rmdir(c.cache_dir.c_str());
  e = Engine::create(c);
  ASSERT_TRUE(e.ok()) << e.error().to_string();
  struct stat st {};
  EXPECT_EQ(::stat(c.cache_dir.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  e.value().reset();
  ::rmdir(c.cache_dir.c_str());
}

}  // namespace uvcl::job_files_test
