// device_json.cpp — see device_json.hpp.
#include "program/device_json.hpp"

#include <cstdint>
#include <string_view>

#include <vector>

#include "json/text.hpp"

namespace uvcl {

namespace {

class JsonObject {
 public:
  explicit JsonObject(std::string& out) : out_(out) { out_ += '{'; }
  void key(const char* k) {
    if (!first_) out_ += ',';
    first_ = false;
    json::append_string(out_, k);
    out_ += ':';
  }
  void field(const char* k, std::string_view v) {
    key(k);
    json::append_string(out_, v);
  }
  void field(const char* k, bool v) {
    key(k);
    out_ += v ? "true" : "false";
  }
  void field(const char* k, std::uint64_t v) {
    key(k);
    out_ += std::to_string(v);
  }
  template <class T>
  void array(const char* k, const std::vector<T>& values) {
    key(k);
    out_ += '[';
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (i != 0) out_ += ',';
      out_ += std::to_string(static_cast<std::uint64_t>(values[i]));
    }
    out_ += ']';
  }
  void close() { out_ += '}'; }

 private:
  std::string& out_;
  bool first_ = true;
};

}  // namespace

std::string device_info_json(const DeviceInfo& d) {
  std::string out;
  JsonObject o(out);
  o.field("index", std::uint64_t{d.index});
  o.field("platform_index", std::uint64_t{d.platform_index});
  o.field("platform_name", d.platform_name);
  o.field("platform_vendor", d.platform_vendor);
  o.field("platform_version", d.platform_version);
  o.field("name", d.name);
  o.field("vendor", d.vendor);
  o.field("driver_version", d.driver_version);
  o.field("device_version", d.device_version);
  o.field("opencl_c_version", d.opencl_c_version);
  o.field("type", std::string_view(device_type_name(d.type)));
  o.field("compute_units", std::uint64_t{d.compute_units});
  o.field("max_clock_mhz", std::uint64_t{d.max_clock_mhz});
  o.field("global_memory", std::uint64_t{d.global_memory});
  o.field("max_allocation", std::uint64_t{d.max_allocation});
  o.field("local_memory", std::uint64_t{d.local_memory});
  o.field("max_work_group_size", std::uint64_t{d.max_work_group_size});
  o.field("max_work_item_dims", std::uint64_t{d.max_work_item_dims});
  o.array("max_work_item_sizes", d.max_work_item_sizes);
  o.array("max_global_sizes", d.max_global_sizes);
  o.field("preferred_float_vector_width", std::uint64_t{d.preferred_float_vector_width});
  o.field("warp_size", std::uint64_t{d.warp_size});
  o.field("fp16", d.fp16);
  o.field("fp64", d.fp64);
  o.field("matrix_units", d.matrix_units);
  o.field("profiling_timer_resolution_ns", std::uint64_t{d.profiling_timer_resolution_ns});
  o.field("extensions", d.extensions);
  o.close();
  return out;
}

}  // namespace uvcl
