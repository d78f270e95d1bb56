// Tensor, graph IR, thread pool and registry basics.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <thread>

#include "core/sanitizers.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "graph/graph.h"
#include "ops/registry.h"

namespace octet {
namespace {

TEST(Tensor, AllocatesAlignedZeroedStorage) {
  Tensor t(DType::kInt32, {3, 5});
  EXPECT_EQ(t.numel(), 15);
  EXPECT_EQ(t.nbytes(), 60u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw()) % 64, 0u);
  for (int i = 0; i < 15; ++i) EXPECT_EQ(t.data<int32_t>()[i], 0);
}

TEST(Tensor, EmptyAndScalar) {
  Tensor empty(DType::kFloat32, {4, 0});
  EXPECT_EQ(empty.numel(), 0);
  Tensor scalar(DType::kUInt8, {});
  EXPECT_EQ(scalar.numel(), 1);
}

TEST(Tensor, TypedAccessChecksType) {
  Tensor t(DType::kFloat16, {2});
  EXPECT_NO_THROW(t.data<uint16_t>());
  EXPECT_THROW(t.data<float>(), Error);
  Tensor i4(DType::kInt4, {2});
  EXPECT_NO_THROW(i4.data<int8_t>());
  EXPECT_THROW(i4.data<uint8_t>(), Error);
}

TEST(Tensor, ReshapeKeepsBytesAndChecksCount) {
  Tensor t(DType::kInt8, {2, 3});
  t.data<int8_t>()[5] = 7;
  Tensor r = t.Reshaped({6});
  EXPECT_EQ(r.data<int8_t>()[5], 7);
  EXPECT_THROW(t.Reshaped({5}), Error);
  Tensor c = t.Clone();
  c.data<int8_t>()[5] = 1;
  EXPECT_EQ(t.data<int8_t>()[5], 7);
}

// Packed nibbles (element 2 i in byte i's low nibble) are read only as such; unpacking
// gives int4 as -8..7 and uint4 as 0..15, an odd count's last element alone in its byte.
TEST(Tensor, PackedNibblesAreReadOnlyAsSuch) {
  const uint8_t bytes[3] = {0x8F, 0x70, 0x0A};  // elements 15 8 0 7 10 (and a spare 0)
  auto owner = std::make_shared<int>(0);
  const Tensor u4 = Tensor::PackedNibbles(DType::kUInt4, {5}, bytes, owner);
  EXPECT_TRUE(u4.packed_nibbles());
  EXPECT_EQ(u4.nbytes(), 3u);
  EXPECT_EQ(u4.nibbles(), bytes);
  EXPECT_THROW(u4.raw(), Error);
  EXPECT_THROW(u4.data<uint8_t>(), Error);
  const Tensor unpacked = UnpackedNibbles(u4);
  EXPECT_FALSE(unpacked.packed_nibbles());
  EXPECT_EQ(unpacked.nbytes(), 5u);
  EXPECT_THROW(unpacked.nibbles(), Error);
  const uint8_t want_u4[5] = {15, 8, 0, 7, 10};
  EXPECT_EQ(std::memcmp(unpacked.data<uint8_t>(), want_u4, 5), 0);
  const Tensor i4 = UnpackedNibbles(Tensor::PackedNibbles(DType::kInt4, {5}, bytes, owner));
  const int8_t want_i4[5] = {-1, -8, 0, 7, -6};
  EXPECT_EQ(std::memcmp(i4.data<int8_t>(), want_i4, 5), 0);
  const Tensor copy = u4.Reshaped({1, 5}).Clone();
  EXPECT_EQ(copy.shape(), (Shape{1, 5}));
  EXPECT_EQ(std::memcmp(copy.data<uint8_t>(), want_u4, 5), 0);
  EXPECT_EQ(UnpackedNibbles(unpacked).raw(), unpacked.raw());  // already unpacked: itself
  EXPECT_THROW(Tensor::PackedNibbles(DType::kUInt8, {2}, bytes, owner), Error);
}

TEST(Tensor, RejectsNegativeDimsAndUnsupportedTypes) {
  EXPECT_THROW(Tensor(DType::kFloat32, {-1}), Error);
  EXPECT_THROW(Tensor(DType::kString, {1}), Error);
}

// A large buffer goes back to the cache and serves the next tensor of its size class:
// one that grew by several pages (a decoder's KV cache 20 positions longer) included,
// still zero past its last element.
TEST(Tensor, LargeBuffersServeTheNextTensorOfTheirSizeClass) {
  if (kAddressSanitizer) GTEST_SKIP() << "under AddressSanitizer buffers go back to the allocator";
  ReleaseCachedTensorMemory();
  const void* first;
  {
    Tensor t(DType::kFloat32, {1, 3, 400, 64});  // 300 KiB
    t.data<float>()[t.numel() - 1] = 1.f;
    first = t.raw();
  }
  Tensor grown = Tensor::Uninitialized(DType::kFloat32, {1, 3, 420, 64});
  EXPECT_EQ(grown.raw(), first);
  const auto* bytes = static_cast<const unsigned char*>(grown.raw());
  for (size_t i = grown.nbytes(); i < grown.nbytes() + 64; ++i) EXPECT_EQ(bytes[i], 0) << i;
  ReleaseCachedTensorMemory();
}

// A small buffer goes to its size class's free list and serves the next tensor of that
// class, which is still all zeros when it asks for zeros (the list's link lived in it).
TEST(Tensor, SmallBuffersServeTheNextTensorOfTheirSizeClass) {
  if (kAddressSanitizer)
    GTEST_SKIP() << "under AddressSanitizer small buffers go back to the allocator";
  ReleaseCachedTensorMemory();
  const void* first;
  {
    Tensor t = Tensor::Uninitialized(DType::kFloat32, {3, 5});
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = 1.f;
    first = t.raw();
  }
  Tensor again(DType::kInt32, {15});
  EXPECT_EQ(again.raw(), first);
  for (int64_t i = 0; i < again.numel() + 16; ++i) EXPECT_EQ(again.data<int32_t>()[i], 0) << i;
  ReleaseCachedTensorMemory();
}

// A thread's small buffers go when it exits, those it freed of another thread's
// tensors included, and a tensor it made is freed safely after it is gone.
TEST(Tensor, SmallBuffersOfAThreadGoWithIt) {
  Tensor made_here(DType::kFloat32, {4, 4});
  Tensor made_there;
  std::thread worker([&] {
    { Tensor scratch(DType::kInt8, {100}); }
    made_there = Tensor(DType::kInt32, {3});
    made_here = Tensor();  // freed on the worker: joins its lists
  });
  worker.join();
  EXPECT_EQ(made_there.data<int32_t>()[2], 0);
  made_there = Tensor();  // freed here, after its thread's lists are gone
  Tensor again(DType::kFloat32, {4, 4});
  EXPECT_EQ(again.data<float>()[15], 0.f);
}

Graph ChainGraph() {
  // x -> A -> y -> B -> z, nodes stored in reverse order.
  Graph g;
  int x = g.AddValue("x"), y = g.AddValue("y"), z = g.AddValue("z");
  g.inputs = {x};
  g.outputs = {z};
  Node b;
  b.op_type = "B";
  b.inputs = {y};
  b.outputs = {z};
  Node a;
  a.op_type = "A";
  a.inputs = {x};
  a.outputs = {y};
  g.nodes = {b, a};
  return g;
}

TEST(Graph, TopologicalSortOrdersProducersFirst) {
  Graph g = ChainGraph();
  g.TopologicalSort();
  EXPECT_EQ(g.nodes[0].op_type, "A");
  EXPECT_EQ(g.nodes[1].op_type, "B");
  EXPECT_EQ(g.values[g.FindValue("z")].producer, 1);
}

TEST(Graph, TopologicalSortRejectsCyclesAndDanglingInputs) {
  Graph cyc = ChainGraph();
  cyc.nodes[1].inputs = {cyc.FindValue("z")};  // A consumes B's output
  EXPECT_THROW(cyc.TopologicalSort(), Error);
  Graph dangling = ChainGraph();
  dangling.nodes[1].inputs = {dangling.AddValue("nowhere")};
  try {
    dangling.TopologicalSort();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nowhere"), std::string::npos);
  }
}

TEST(ThreadPool, CoversRangeExactlyOnce) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 2, 5, 1000}) {
      std::vector<std::atomic<int>> hits(n);
      pool.ParallelFor(n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[i]++;
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1);
    }
  }
}

TEST(ThreadPool, BackToBackJobsOnMoreThreadsThanCores) {
  // Many short jobs on an oversubscribed pool: workers wake late and find jobs done or
  // replaced; every job must still cover its range exactly once, with the same chunks.
  for (int threads : {2, 3, 8}) {
    ThreadPool pool(threads);
    for (int job = 0; job < 3000; ++job) {
      const int64_t n = 1 + job % 17;
      std::vector<std::atomic<int>> hits(n);
      std::vector<std::pair<int64_t, int64_t>> chunks(n, {-1, -1});
      pool.ParallelFor(n, [&](int64_t b, int64_t e) {
        chunks[b] = {b, e};
        for (int64_t i = b; i < e; ++i) hits[i]++;
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << threads << " " << job;
      // The partition depends on n and the pool size only: equal chunks, larger first.
      const int64_t parts = std::min<int64_t>(n, threads);
      int64_t begin = 0;
      for (int64_t c = 0; c < parts; ++c) {
        const int64_t size = n / parts + (c < n % parts ? 1 : 0);
        ASSERT_EQ(chunks[begin], std::make_pair(begin, begin + size));
        begin += size;
      }
    }
  }
}

TEST(ThreadPool, PropagatesExceptions) {
  ThreadPool pool(2);
  EXPECT_THROW(pool.ParallelFor(10,
                                [](int64_t b, int64_t) {
                                  if (b > 0) Fail("boom");
                                }),
               Error);
  // The pool stays usable after an exception.
  std::atomic<int> sum{0};
  pool.ParallelFor(4, [&](int64_t b, int64_t e) { sum += static_cast<int>(e - b); });
  EXPECT_EQ(sum.load(), 4);
}

TEST(Registry, UnknownOperatorNamesDomainAndOpset) {
  Node n;
  n.op_type = "FrobnicateLinear";
  n.domain = "com.example";
  n.opset = 3;
  try {
    KernelRegistry::Global().Find(n, {DType::kFloat32});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("FrobnicateLinear"), std::string::npos) << msg;
    EXPECT_NE(msg.find("com.example"), std::string::npos) << msg;
    EXPECT_NE(msg.find("opset 3"), std::string::npos) << msg;
  }
}

TEST(Registry, OnnxRuntimeFusionsSayWhereTheyComeFrom) {
  Node n;
  n.op_type = "SkipLayerNormalization";
  n.domain = kMsDomain;
  n.opset = 1;
  n.name = "sln";
  try {
    KernelRegistry::Global().Find(n, {DType::kFloat32});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("unsupported operator SkipLayerNormalization (domain com.microsoft, "
                       "opset 1) in node 'sln': a fusion that ONNX Runtime's graph "
                       "optimizations write"),
              std::string::npos)
        << msg;
  }
  // Another com.microsoft operator octet lacks gets no such hint.
  n.op_type = "FrobnicateLinear";
  try {
    KernelRegistry::Global().Find(n, {DType::kFloat32});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("ONNX Runtime"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace octet
