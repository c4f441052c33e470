// Result<T>::value() of an error, and error() of a value: a defined abort
// with the error's message on stderr, whatever the build type. Built twice
// (test/json/meson.build): as configured, and with NDEBUG (a release build's
// asserts are gone; the abort must not be).
#include <gtest/gtest.h>

#include <string>

#include "uvcl/status.hpp"

namespace result_test {

uvcl::Result<int> failing() { return uvcl::Error{uvcl::Status::InvalidArgument, "allocate: size must not be 0"}; }
uvcl::Result<int> working() { return 7; }
uvcl::Result<void> failing_void() { return uvcl::Error{uvcl::Status::Io, "cannot write x"}; }

TEST(ResultDeathTest, ValueOfAnErrorAbortsWithItsMessage) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH((void)failing().value(),
               "uvcl: Result::value\\(\\) of an error: InvalidArgument: allocate: size must not be 0");
  EXPECT_DEATH(
      {
        auto r = failing();
        (void)*r;
      },
      "InvalidArgument: allocate: size must not be 0");
  EXPECT_DEATH(
      {
        const auto r = failing();
        (void)r.value();
      },
      "of an error: InvalidArgument");
}

TEST(ResultDeathTest, ErrorOfAValueAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH((void)working().error(), "uvcl: Result::error\\(\\) of a result that holds a value");
  EXPECT_DEATH((void)uvcl::Result<void>{}.error(), "uvcl: Result::error\\(\\) of a result that holds a value");
}

TEST(Result, CheckedAccessStillWorks) {
  auto r = working();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value(), 7);
  EXPECT_EQ(*r, 7);
  auto f = failing_void();
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.error().to_string(), "Io: cannot write x");
#ifdef NDEBUG
  std::printf("built with NDEBUG\n");
#endif
}

}  // namespace result_test
