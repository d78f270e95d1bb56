// The 256-entry table lookup (kernels/int8/lookup.h) on every path against a plain loop
// written here (1- and 4-byte entries): every index, both offsets, lengths around the
// 32- and 64-element vectors and buffers that end at a guard page (an over-read or over-write
// faults).
#include "kernels/int8/lookup.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "guarded_buffer.h"
#include "kernels/isa.h"

namespace octet {
namespace {

using BytePath = void (*)(const uint8_t*, int64_t, uint8_t, const uint8_t*, uint8_t*);

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (uint8_t& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

void CheckBytePath(BytePath path) {
  const std::vector<uint8_t> table = RandomBytes(256, 1);
  for (const uint8_t offset : {uint8_t{0}, uint8_t{128}}) {
    for (const int64_t n : {0, 1, 31, 32, 33, 63, 64, 65, 127, 128, 129, 256, 1000, 4099}) {
      std::vector<uint8_t> values = RandomBytes(n, static_cast<uint32_t>(n) + offset);
      for (int64_t i = 0; i < n && i < 256; ++i) values[i] = static_cast<uint8_t>(i);  // all
      GuardedBuffer<uint8_t> x(n), y(n);
      if (n) std::memcpy(x.data(), values.data(), n);
      path(x.data(), n, offset, table.data(), y.data());
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(y.data()[i], table[static_cast<uint8_t>(values[i] + offset)])
            << "n=" << n << " i=" << i << " offset=" << int{offset};
    }
  }
}

TEST(LookupTest, ScalarBytes) { CheckBytePath(LookupBytesScalar); }

TEST(LookupTest, Avx2Bytes) {
#if defined(__x86_64__) || defined(_M_X64)
  if (!IsaSupported(Isa::kAvx2)) GTEST_SKIP() << IsaUnsupportedReason(Isa::kAvx2);
  CheckBytePath(LookupBytesAvx2);
#else
  GTEST_SKIP() << "x86-64 only";
#endif
}

TEST(LookupTest, Avx512VbmiBytes) {
#if defined(__x86_64__) || defined(_M_X64)
  if (!HasAvx512Vbmi()) GTEST_SKIP() << "this CPU lacks AVX512_VBMI";
  CheckBytePath(LookupBytesAvx512Vbmi);
#else
  GTEST_SKIP() << "x86-64 only";
#endif
}

using DwordPath = void (*)(const uint8_t*, int64_t, uint8_t, const DwordTable256&, void*);

void CheckDwordPath(DwordPath path) {
  const std::vector<uint8_t> bytes = RandomBytes(256 * 4, 2);  // any bits, NaN patterns too
  std::vector<uint32_t> entries(256);
  std::memcpy(entries.data(), bytes.data(), bytes.size());
  const DwordTable256 table(entries.data());
  for (const uint8_t offset : {uint8_t{0}, uint8_t{128}}) {
    for (const int64_t n :
         {0, 1, 15, 16, 17, 31, 33, 48, 63, 64, 65, 79, 127, 128, 129, 256, 1000, 4099}) {
      std::vector<uint8_t> values = RandomBytes(n, static_cast<uint32_t>(n) + offset + 3);
      for (int64_t i = 0; i < n && i < 256; ++i) values[i] = static_cast<uint8_t>(255 - i);  // all
      GuardedBuffer<uint8_t> x(n);
      GuardedBuffer<uint32_t> y(n);
      if (n) std::memcpy(x.data(), values.data(), n);
      path(x.data(), n, offset, table, y.data());
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(y.data()[i], entries[static_cast<uint8_t>(values[i] + offset)])
            << "n=" << n << " i=" << i << " offset=" << int{offset};
    }
  }
}

TEST(LookupTest, ScalarDwords) { CheckDwordPath(LookupDwordsScalar); }

TEST(LookupTest, Avx512VbmiDwords) {
#if defined(__x86_64__) || defined(_M_X64)
  if (!HasAvx512Vbmi()) GTEST_SKIP() << "this CPU lacks AVX512_VBMI";
  CheckDwordPath(LookupDwordsAvx512Vbmi);
#else
  GTEST_SKIP() << "x86-64 only";
#endif
}

// Through the dispatch, short and long (the 4-byte table takes the byte planes then).
TEST(LookupTest, WideElements) {
  const std::vector<uint8_t> long_x = RandomBytes(5000, 7);
  for (const size_t size : {size_t{2}, size_t{4}, size_t{8}})
    for (const size_t length : {size_t{333}, long_x.size()}) {
      const std::vector<uint8_t> x(long_x.begin(),
                                   long_x.begin() + static_cast<std::ptrdiff_t>(length));
      const std::vector<uint8_t> table = RandomBytes(256 * size, static_cast<uint32_t>(size));
      std::vector<uint8_t> y(x.size() * size);
      LookupTable256(x.data(), static_cast<int64_t>(x.size()), 128, table.data(), size, y.data());
      for (size_t i = 0; i < x.size(); ++i) {
        const uint8_t index = static_cast<uint8_t>(x[i] + 128);
        ASSERT_EQ(std::memcmp(&y[i * size], &table[index * size], size), 0) << size << " " << i;
      }
    }
}

}  // namespace
}  // namespace octet
