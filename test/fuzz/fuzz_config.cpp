// libFuzzer target: the config parser must turn any byte string into either a
// Config or an Error, never a crash, hang or sanitizer report.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "uvcl/config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto result = uvcl::parse_config(text, "fuzz");
  // Touch the error text so a malformed message (dangling view) is caught too.
  if (!result) (void)result.error().message.size();
  return 0;
}
