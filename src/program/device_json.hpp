// device_json.hpp — a device's facts as JSON, for `uvcl devices --json` and
// run reports.
#pragma once

#include <string>

#include "uvcl/device_info.hpp"

namespace uvcl {

// Every DeviceInfo field as one JSON object (valid UTF-8; driver strings
// escaped, invalid bytes replaced by U+FFFD). Integers are exact (no double
// rounding on output).
std::string device_info_json(const DeviceInfo& d);

}  // namespace uvcl
