#include <gtest/gtest.h>
namespace job_test {}
