// A mapped file that shrinks under its mapping: reads past its new end see
// zeros instead of killing the process with SIGBUS, and check_intact()
// reports the damage.
#include "util/mapped_file.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>

#include "support/test_support.h"
#include "util/error.h"
#include "util/sigbus_guard.h"

namespace pagellm {
namespace {

uint8_t read_byte(const MappedFile& f, size_t at) {
  return *static_cast<const volatile uint8_t*>(f.data() + at);
}

TEST(MappedFile, ReadsAndChecksIntact) {
  test::TempPath path(".bin");
  test::write_file(path.path, std::string(3 * 4096 + 10, 'x'));
  MappedFile f(path.path);
  EXPECT_EQ(f.size(), 3u * 4096 + 10);
  EXPECT_EQ(read_byte(f, 3 * 4096 + 5), 'x');
  EXPECT_NO_THROW(f.check_intact());
  MappedFile r(path.path, MappedFile::Mode::kRead);
  ASSERT_EQ(::truncate(path.path.c_str(), 0), 0);
  EXPECT_NO_THROW(r.check_intact());  // a private copy: unaffected
  EXPECT_EQ(r.data()[4096], 'x');
}

TEST(MappedFile, TruncationIsDetectedByCheckIntact) {
  test::TempPath path(".bin");
  test::write_file(path.path, std::string(4 * 4096, 'x'));
  MappedFile f(path.path);
  ASSERT_EQ(::truncate(path.path.c_str(), 4096), 0);
  try {
    f.check_intact();
    FAIL() << "no error";
  } catch (const SystemError& e) {
    EXPECT_NE(
        std::string(e.what()).find("was truncated while in use (4096 bytes, 16384 when opened)"),
        std::string::npos)
        << e.what();
  }
}

TEST(MappedFile, ReadPastTheNewEndSeesZerosNotSigbus) {
  test::TempPath path(".bin");
  test::write_file(path.path, std::string(4 * 4096, 'x'));
  MappedFile f(path.path);
  ASSERT_EQ(::truncate(path.path.c_str(), 4096), 0);
  EXPECT_EQ(read_byte(f, 100), 'x');     // still in the file
  EXPECT_EQ(read_byte(f, 2 * 4096), 0);  // past its end: SIGBUS repaired with zeros
  EXPECT_EQ(read_byte(f, 4 * 4096 - 1), 0);
  // Grown back to its size, the file passes the size check, but the damage stays known.
  ASSERT_EQ(::truncate(path.path.c_str(), 4 * 4096), 0);
  try {
    f.check_intact();
    FAIL() << "no error";
  } catch (const SystemError& e) {
    EXPECT_NE(std::string(e.what()).find("shrank while in use"), std::string::npos) << e.what();
  }
}

TEST(MappedFile, SigbusOutsideWatchedRangesStillKills) {
  EXPECT_DEATH(
      {
        test::TempPath path(".bin");
        test::write_file(path.path, std::string(2 * 4096, 'x'));
        MappedFile guard_installed(path.path);  // the handler is in place
        int fd = ::open(path.path.c_str(), O_RDONLY);
        void* p = ::mmap(nullptr, 2 * 4096, PROT_READ, MAP_SHARED, fd, 0);
        (void)::truncate(path.path.c_str(), 0);
        (void)*static_cast<volatile uint8_t*>(static_cast<uint8_t*>(p) + 4096);
      },
      "");
}

}  // namespace
}  // namespace pagellm
