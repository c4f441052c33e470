// libFuzzer target: the job parser. Files are disallowed so the target never
// touches the file system and stays deterministic.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "program/job.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  uvcl::job::ParseOptions options;
  options.allow_files = false;
  auto result = uvcl::job::parse_job(text, "fuzz", options);
  if (!result) (void)result.error().message.size();
  return 0;
}
