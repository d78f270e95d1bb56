// The arena packed weights live in (core/weight_arena.h), and the packers that
// take one: the same packed bytes as on the heap, kept in the arena when a
// kernel moves them into its member.
#include "core/weight_arena.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/int8/gemm.h"
#include "kernels/nbits/nbits.h"

namespace octet {
namespace {

bool AllZero(const void* p, size_t bytes) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < bytes; ++i)
    if (b[i] != 0) return false;
  return true;
}

// Blocks of assorted sizes, more than one chunk's worth, one larger than a quarter
// chunk among them: each aligned, zero-filled and disjoint from the others (each is
// filled with its own byte, then all are checked).
TEST(WeightArena, BlocksAreAlignedZeroedAndDisjoint) {
  WeightArena arena;
  std::mt19937 rng(7);
  std::uniform_int_distribution<size_t> size(0, 300000);
  std::vector<std::pair<unsigned char*, size_t>> blocks;
  size_t total = 0;
  while (total < (size_t{80} << 20)) {
    const size_t bytes = blocks.size() == 20 ? (size_t{12} << 20) + 3 : size(rng);
    auto* p = static_cast<unsigned char*>(arena.Allocate(bytes));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % WeightArena::kAlignment, 0u);
    EXPECT_TRUE(AllZero(p, bytes)) << "block " << blocks.size();
    std::memset(p, static_cast<int>(blocks.size() % 251 + 1), bytes);
    blocks.push_back({p, bytes});
    total += bytes;
  }
  for (size_t i = 0; i < blocks.size(); ++i) {
    const auto [p, bytes] = blocks[i];
    for (size_t j = 0; j < bytes; ++j)
      ASSERT_EQ(p[j], i % 251 + 1) << "block " << i << " byte " << j;
  }
}

TEST(WeightArena, VectorsKeepTheirArenaWhenMovedOrCopied) {
  WeightArena arena;
  WeightVector<float> packed(1000, 2.f, WeightAllocator<float>(&arena));
  const float* data = packed.data();
  WeightVector<float> member;  // a kernel's member, default-constructed
  member = std::move(packed);
  EXPECT_EQ(member.data(), data);
  EXPECT_EQ(member.get_allocator().arena(), &arena);
  WeightVector<float> copy;
  copy = member;
  EXPECT_EQ(copy.get_allocator().arena(), &arena);
  EXPECT_EQ(copy, member);
  WeightVector<int> heap(5, 3);  // no arena: the heap
  heap.push_back(4);
  EXPECT_EQ(heap.get_allocator().arena(), nullptr);
  EXPECT_EQ(heap.back(), 4);
}

TEST(WeightArena, PackedNBitsInTheArenaGiveTheSameProduct) {
  const int64_t M = 3, K = 100, N = 37, block = 32, k_blocks = (K + block - 1) / block;
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> nibble(0, 15);
  std::uniform_real_distribution<float> unit(-1.f, 1.f);
  std::vector<uint8_t> q(N * K);
  for (auto& v : q) v = static_cast<uint8_t>(nibble(rng));
  std::vector<float> scales(N * k_blocks), zero(N * k_blocks), a(M * K);
  for (auto& s : scales) s = 0.01f + 0.01f * unit(rng);
  for (auto& z : zero) z = static_cast<float>(nibble(rng));
  for (auto& v : a) v = unit(rng);
  for (NBitsArithmetic arith : {NBitsArithmetic::kFloat, NBitsArithmetic::kInt8}) {
    WeightArena arena;
    PackedNBits in_arena;
    in_arena = PackNBits(q.data(), scales.data(), zero.data(), K, N, block, arith, &arena);
    EXPECT_EQ(in_arena.data.get_allocator().arena(), &arena);
    EXPECT_EQ(in_arena.scales.get_allocator().arena(), &arena);
    const PackedNBits on_heap = PackNBits(q.data(), scales.data(), zero.data(), K, N, block, arith);
    EXPECT_EQ(in_arena.data, on_heap.data);
    std::vector<float> y1(M * N), y2(M * N);
    NBitsMatMul(in_arena, M, a.data(), K, nullptr, y1.data(), N, nullptr);
    NBitsMatMul(on_heap, M, a.data(), K, nullptr, y2.data(), N, nullptr);
    EXPECT_EQ(std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)), 0);
  }
}

TEST(WeightArena, PackedInt8BInTheArenaHoldsTheSameBytes) {
  const int64_t K = 77, N = 45;
  std::mt19937 rng(5);
  std::vector<uint8_t> b(K * N);
  for (auto& v : b) v = static_cast<uint8_t>(rng());
  const GemmPlan plan = PlanGemm(ActiveIsa(), /*a_signed=*/false);
  WeightArena arena;
  const PackedB in_arena = PackB(plan, b.data(), /*b_signed=*/true, K, N, N, &arena);
  const PackedB on_heap = PackB(plan, b.data(), /*b_signed=*/true, K, N, N);
  ASSERT_EQ(in_arena.data.nbytes(), on_heap.data.nbytes());
  // The bytes and the padding past them, which the kernels may read.
  EXPECT_EQ(std::memcmp(in_arena.data.raw(), on_heap.data.raw(), in_arena.data.nbytes() + 64), 0);
  EXPECT_EQ(in_arena.col_sums, on_heap.col_sums);
}

}  // namespace
}  // namespace octet
