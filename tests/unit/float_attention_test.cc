// octet.FloatAttention and octet.MaskedSoftmax (ops/float_ops.cc) against the
// nodes they replace, run one by one through the registry: the same bits on
// every shape, both mask orders, every thread count, on their in-cache paths
// and their fallbacks (broadcast batch dims, a divisor of several values, a
// mask that widens the scores).
#include "rewrite/float_attention.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <optional>
#include <random>

#include "core/thread_pool.h"
#include "graph/octet_ops.h"
#include "int_op_test_util.h"
#include "kernels/isa.h"
#include "ops/kv_cache.h"
#include "ops/registry.h"
#include "rewrite/qdq_lookup.h"

namespace octet {
namespace {

Tensor Random(Shape shape, uint32_t seed, float scale) {
  Tensor t(DType::kFloat32, std::move(shape));
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, scale);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

Tensor Unfused(const Tensor& q, const Tensor& k_t, const Tensor& divisor, const Tensor& mask,
               const Tensor& v, bool mask_first) {
  const Tensor scores = int_test::RunNode("MatMul", 13, {q, k_t});
  const Tensor scaled = int_test::RunNode("Div", 14, {scores, divisor});
  const Tensor masked = mask_first ? int_test::RunNode("Add", 14, {mask, scaled})
                                   : int_test::RunNode("Add", 14, {scaled, mask});
  const Tensor probs = int_test::RunNode("Softmax", 13, {masked}, {{"axis", Attribute::Int(-1)}});
  return int_test::RunNode("MatMul", 13, {probs, v});
}

struct Case {
  Shape q, k_t, divisor, mask, v;
};

TEST(FloatAttention, SameBitsAsTheFiveNodes) {
  ThreadPool pool2(2), pool3(3);
  const Case cases[] = {
      {{2, 3, 10, 8}, {2, 3, 8, 13}, {}, {2, 1, 1, 13}, {2, 3, 13, 5}},  // per-head path
      {{1, 2, 128, 32}, {1, 2, 32, 128}, {1}, {1, 1, 1, 128}, {1, 2, 128, 32}},
      {{3, 7, 1}, {3, 1, 9}, {}, {7, 9}, {3, 9, 4}},                       // K = 1, 2-D mask
      {{4, 5}, {5, 6}, {}, {6}, {6, 3}},                                   // no batch dims
      {{2, 3, 10, 8}, {1, 3, 8, 13}, {}, {2, 1, 1, 13}, {2, 3, 13, 5}},    // broadcast batch
      {{2, 3, 10, 8}, {2, 3, 8, 13}, {13}, {2, 1, 1, 13}, {2, 3, 13, 5}},  // divisor per column
      {{2, 1, 10, 8}, {2, 1, 8, 13}, {}, {2, 3, 10, 13}, {2, 1, 13, 5}},   // mask widens scores
  };
  uint32_t seed = 1;
  for (const Case& c : cases)
    for (bool mask_first : {false, true}) {
      const Tensor q = Random(c.q, seed++, 1.f), k_t = Random(c.k_t, seed++, 1.f);
      const Tensor v = Random(c.v, seed++, 1.f), mask = Random(c.mask, seed++, 4.f);
      Tensor divisor = Random(c.divisor, seed++, 1.f);
      for (int64_t i = 0; i < divisor.numel(); ++i) divisor.data<float>()[i] += 3.f;
      const Tensor expected = Unfused(q, k_t, divisor, mask, v, mask_first);
      for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2, &pool3}) {
        int_test::NodeRun how{.domain = kOctetDomain, .pool = pool, .runs = 2};
        if (mask_first) how.attributes["mask_first"] = Attribute::Int(1);
        const Tensor got = int_test::RunNode(kFloatAttentionOp, 1, {q, k_t, divisor, mask, v}, how);
        ASSERT_EQ(got.shape(), expected.shape()) << ShapeToString(c.q);
        EXPECT_EQ(std::memcmp(got.raw(), expected.raw(), got.nbytes()), 0)
            << ShapeToString(c.q) << " x " << ShapeToString(c.k_t) << " mask "
            << ShapeToString(c.mask) << " mask_first " << mask_first << " threads "
            << (pool ? pool->num_threads() : 1);
      }
    }
}

Tensor Transposed(const Tensor& x, std::vector<int64_t> perm) {
  return int_test::RunNode("Transpose", 13, {x}, {{"perm", Attribute::Ints(std::move(perm))}});
}

TEST(FloatAttention, HeadsInnerSameBitsAsTheTransposesAndFiveNodes) {
  ThreadPool pool2(2), pool3(3);
  // q, k, v as [batch, sequence, heads, head size]; mask; divisor.
  struct HeadsCase {
    Shape q, k, v, mask, divisor;
  };
  const HeadsCase cases[] = {
      {{2, 10, 3, 8}, {2, 13, 3, 8}, {2, 13, 3, 5}, {2, 1, 1, 13}, {}},  // per-head path
      {{1, 128, 12, 32}, {1, 128, 12, 32}, {1, 128, 12, 32}, {1, 1, 1, 128}, {}},
      {{3, 33, 2, 7}, {3, 40, 2, 7}, {3, 40, 2, 9}, {40}, {1}},
      {{2, 10, 3, 8}, {1, 13, 3, 8}, {2, 13, 3, 5}, {2, 1, 1, 13}, {}},    // broadcast batch
      {{2, 10, 3, 8}, {2, 13, 3, 8}, {2, 13, 3, 5}, {2, 1, 1, 13}, {13}},  // divisor per column
  };
  uint32_t seed = 50;
  for (const HeadsCase& c : cases)
    for (bool mask_first : {false, true}) {
      const Tensor q = Random(c.q, seed++, 1.f), k = Random(c.k, seed++, 1.f);
      const Tensor v = Random(c.v, seed++, 1.f), mask = Random(c.mask, seed++, 4.f);
      Tensor divisor = Random(c.divisor, seed++, 1.f);
      for (int64_t i = 0; i < divisor.numel(); ++i) divisor.data<float>()[i] += 3.f;
      const Tensor expected =
          Transposed(Unfused(Transposed(q, {0, 2, 1, 3}), Transposed(k, {0, 2, 3, 1}), divisor,
                             mask, Transposed(v, {0, 2, 1, 3}), mask_first),
                     {0, 2, 1, 3});
      for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2, &pool3}) {
        int_test::NodeRun how{.domain = kOctetDomain, .pool = pool, .runs = 2};
        how.attributes["heads_inner"] = Attribute::Int(1);
        if (mask_first) how.attributes["mask_first"] = Attribute::Int(1);
        const Tensor got = int_test::RunNode(kFloatAttentionOp, 1, {q, k, divisor, mask, v}, how);
        ASSERT_EQ(got.shape(), expected.shape()) << ShapeToString(c.q);
        EXPECT_EQ(std::memcmp(got.raw(), expected.raw(), got.nbytes()), 0)
            << ShapeToString(c.q) << " x " << ShapeToString(c.k) << " mask "
            << ShapeToString(c.mask) << " mask_first " << mask_first << " threads "
            << (pool ? pool->num_threads() : 1);
      }
    }
  // Heads inner needs rank 4.
  const Tensor q3 = Random({2, 4, 8}, 1, 1.f), mask = Random({4}, 2, 1.f);
  int_test::ExpectError(
      [&] {
        int_test::RunNode(kFloatAttentionOp, 1, {q3, q3, Random({}, 3, 1.f), mask, q3},
                          int_test::NodeRun{.domain = kOctetDomain,
                                            .attributes = {{"heads_inner", Attribute::Int(1)}}});
      },
      {"node_under_test", "[batch, sequence, heads, head size]"});
}

TEST(FloatAttention, RejectsMismatchedInnerDimensions) {
  const Tensor q = Random({2, 4, 8}, 1, 1.f), k_t = Random({2, 7, 6}, 2, 1.f);
  const Tensor v = Random({2, 6, 3}, 3, 1.f), mask = Random({6}, 4, 1.f),
               divisor = Random({}, 5, 1.f);
  int_test::ExpectError(
      [&] {
        int_test::RunNode(kFloatAttentionOp, 1, {q, k_t, divisor, mask, v},
                          int_test::NodeRun{.domain = kOctetDomain});
      },
      {"node_under_test", "inner dimensions differ"});
}

Tensor RandomBytes(Shape shape, DType type, uint32_t seed) {
  Tensor t(type, std::move(shape));
  std::mt19937 rng(seed);
  for (int64_t i = 0; i < t.numel(); ++i) static_cast<uint8_t*>(t.raw())[i] = rng() & 0xff;
  return t;
}

Tensor Scalar(DType type, float value) {
  Tensor t(type, {});
  if (type == DType::kFloat32) t.data<float>()[0] = value;
  if (type == DType::kUInt8) t.data<uint8_t>()[0] = static_cast<uint8_t>(value);
  if (type == DType::kInt8) t.data<int8_t>()[0] = static_cast<int8_t>(value);
  return t;
}

// The decoder form with appends_kv, run on a KV cache state as a session runs it (the
// length advanced after each run), against the Concat nodes and the keys_rows form
// reading their presents: the same bits for the attention and for the presents when
// asked for, whether the cache grows (reserve 0) or has room, with a prefill of several
// rows, chunks and single rows, on one thread and three. Returns the failing runs.
int64_t AppendingFailures(std::ostream& log) {
  ThreadPool pool3(3);
  constexpr int64_t kBatch = 2, kKvHeads = 2, kGroup = 3, kSize = 8;
  const std::map<std::string, Attribute> decoder = {
      {"keys_rows", Attribute::Int(1)},      {"scale_mul", Attribute::Int(1)},
      {"kv_repeat", Attribute::Int(kGroup)}, {"kv_heads", Attribute::Int(kKvHeads * kGroup)},
      {"kv_size", Attribute::Int(kSize)},    {"v_size", Attribute::Int(kSize)}};
  Node node;
  node.name = "node_under_test";
  node.domain = kOctetDomain;
  node.op_type = kFloatAttentionOp;
  node.opset = 1;
  node.attributes = decoder;
  node.attributes["appends_kv"] = Attribute::Int(1);
  node.attributes["cache_slot"] = Attribute::Int(0);
  node.inputs = {0, 1, 2, 3, 4, 5, 6};
  node.outputs = {7, 8, 9};
  const std::vector<DType> types(7, DType::kFloat32);
  const KernelDef& def = KernelRegistry::Global().Find(node, types);
  int64_t failing = 0;
  auto same = [&](const Tensor& got, const Tensor& want, const std::string& what) {
    if (got.defined() && got.shape() == want.shape() &&
        std::memcmp(got.raw(), want.raw(), want.nbytes()) == 0)
      return;
    if (failing++ < 5) log << what << ": not the expected bits\n";
  };
  if (def.infer_types(node, types) != std::vector<DType>(3, DType::kFloat32))
    log << "appends_kv: not three float outputs\n", ++failing;
  const Tensor factor = Scalar(DType::kFloat32, 0.35f);
  uint32_t seed = 100;
  for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool3})
    for (int64_t reserve : {0, 40}) {
      auto kernel = def.create(KernelInit{node, types, {7, nullptr}, pool});
      KvCacheState cache;
      cache.reserve = reserve;
      cache.nodes.resize(1);
      Tensor past_k(DType::kFloat32, {kBatch, kKvHeads, 0, kSize}), past_v = past_k;
      int step = 0;
      for (int64_t rows : {5, 1, 3, 1, 13, 1, 17}) {
        const int64_t all = cache.length + rows;
        const Tensor q = Random({kBatch, kKvHeads * kGroup, rows, kSize}, seed++, 1.f);
        const Tensor new_k = Random({kBatch, kKvHeads, rows, kSize}, seed++, 1.f);
        const Tensor new_v = Random({kBatch, kKvHeads, rows, kSize}, seed++, 1.f);
        Tensor mask = Random({kBatch, 1, rows, all}, seed++, 1.f);
        for (int64_t b = 0; b < kBatch; ++b)  // causal: row i sees the keys up to its position
          for (int64_t i = 0; i < rows; ++i)
            for (int64_t j = cache.length + i + 1; j < all; ++j)
              mask.data<float>()[(b * rows + i) * all + j] = -1e30f;
        const std::map<std::string, Attribute> rows_axis = {{"axis", Attribute::Int(2)}};
        const Tensor present_k = int_test::RunNode("Concat", 13, {past_k, new_k}, rows_axis);
        const Tensor present_v = int_test::RunNode("Concat", 13, {past_v, new_v}, rows_axis);
        int_test::NodeRun how{.domain = kOctetDomain, .attributes = decoder, .pool = pool};
        const Tensor expected =
            int_test::RunNode(kFloatAttentionOp, 1, {q, present_k, factor, mask, present_v}, how);
        const std::string what =
            "rows " + std::to_string(rows) + " at " + std::to_string(cache.length) + ", reserve " +
            std::to_string(reserve) + ", threads " + std::to_string(pool ? pool->num_threads() : 1);

        cache.presents_wanted = step % 2 == 1;
        cache.appended = -1;
        const Tensor unfed;  // the past inputs are the cache's
        KernelContext ctx(node, {&q, &unfed, &factor, &mask, &unfed, &new_k, &new_v}, pool);
        ctx.set_kv_cache(&cache);
        kernel->Run(ctx);
        same(ctx.outputs()[0], expected, what + ", cached");
        if (cache.appended != rows)
          log << what << ": appended " << cache.appended << "\n", ++failing;
        if (cache.presents_wanted) {
          same(ctx.outputs()[1], present_k, what + ", cached present keys");
          same(ctx.outputs()[2], present_v, what + ", cached present values");
        } else if (ctx.outputs()[1].defined()) {
          log << what << ": present keys written unasked\n", ++failing;
        }
        // Run as the graph is (no cache), the node gives the same bits and the presents.
        KernelContext graph_ctx(node, {&q, &past_k, &factor, &mask, &past_v, &new_k, &new_v}, pool);
        kernel->Run(graph_ctx);
        same(graph_ctx.outputs()[0], expected, what + ", as the graph");
        same(graph_ctx.outputs()[1], present_k, what + ", present keys as the graph");
        cache.length = all;
        past_k = present_k;
        past_v = present_v;
        ++step;
      }
    }
  return failing;
}

TEST(FloatAttention, AppendingToAKvCacheGivesTheConcatsBitsOnEveryPath) {
  // Forced paths in re-executed children first (the keys' panels follow the path).
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  for (Isa isa : SupportedIsas())
    EXPECT_EXIT(std::exit(int_test::ExitCodeWithIsa(IsaName(isa), AppendingFailures)),
                ::testing::ExitedWithCode(0), "")
        << IsaName(isa);
  std::ostringstream log;
  EXPECT_EQ(AppendingFailures(log), 0) << log.str();
}

TEST(FloatAttention, AppendingRefusesAnotherBatchSize) {
  Node node;
  node.name = "node_under_test";
  node.domain = kOctetDomain;
  node.op_type = kFloatAttentionOp;
  node.opset = 1;
  node.attributes = {{"keys_rows", Attribute::Int(1)},
                     {"appends_kv", Attribute::Int(1)},
                     {"cache_slot", Attribute::Int(0)}};
  node.inputs = {0, 1, 2, 3, 4, 5, 6};
  node.outputs = {7, 8, 9};
  const std::vector<DType> types(7, DType::kFloat32);
  auto kernel =
      KernelRegistry::Global()
          .Find(node, types)
          .create(KernelInit{node, types, std::vector<const Tensor*>(7, nullptr), nullptr});
  KvCacheState cache;
  cache.nodes.resize(1);
  const Tensor factor = Scalar(DType::kFloat32, 1.f), unfed;
  auto run = [&](int64_t batch) {
    const Tensor q = Random({batch, 2, 1, 4}, 1, 1.f), rows = Random({batch, 2, 1, 4}, 2, 1.f);
    const Tensor mask(DType::kFloat32, {batch, 1, 1, cache.length + 1});
    KernelContext ctx(node, {&q, &unfed, &factor, &mask, &unfed, &rows, &rows}, nullptr);
    ctx.set_kv_cache(&cache);
    cache.appended = -1;
    kernel->Run(ctx);
    cache.length += cache.appended;
  };
  run(1);
  int_test::ExpectError([&] { run(2); },
                        {"node_under_test", "[1, 2, 1, 4]", "a cache serves one batch size"});
}

TEST(MaskedSoftmax, SameBitsAsTheSeparateNodes) {
  ThreadPool pool2(2), pool3(3);
  struct SoftmaxCase {
    Shape x, mask;
    DType x_type, zero_type;  // kFloat32 x: no table; kUndefined zero: no zero point
    bool quantize;
  };
  const SoftmaxCase cases[] = {
      {{2, 3, 10, 33}, {2, 1, 1, 33}, DType::kUInt8, DType::kUInt8, true},
      {{2, 3, 10, 33}, {2, 1, 1, 33}, DType::kInt8, DType::kInt8, true},
      {{4, 17}, {17}, DType::kUInt8, DType::kUndefined, true},
      {{4, 17}, {4, 1}, DType::kInt8, DType::kUndefined, false},
      {{3, 5, 16}, {3, 5, 16}, DType::kFloat32, DType::kUInt8, true},
      {{3, 5, 16}, {1, 16}, DType::kFloat32, DType::kUndefined, false},
      {{2, 1, 6, 9}, {2, 3, 1, 9}, DType::kUInt8, DType::kUInt8, true},  // mask widens x
      {{1}, {1}, DType::kInt8, DType::kInt8, true},
  };
  uint32_t seed = 100;
  for (const SoftmaxCase& c : cases)
    for (bool mask_first : {false, true}) {
      const bool byte_x = c.x_type != DType::kFloat32;
      const Tensor x = byte_x ? RandomBytes(c.x, c.x_type, seed++) : Random(c.x, seed++, 3.f);
      const Tensor table = Random({256}, seed++, 2.f), mask = Random(c.mask, seed++, 4.f);
      const Tensor y_scale = Scalar(DType::kFloat32, 1.f / 255);
      const Tensor zero = Scalar(c.zero_type == DType::kUndefined ? DType::kUInt8 : c.zero_type,
                                 c.zero_type == DType::kInt8 ? -128.f : 0.f);
      const Tensor scores = byte_x ? int_test::RunNode(kLookupTableOp, 1, {x, table},
                                                       int_test::NodeRun{.domain = kOctetDomain})
                                   : x;
      const Tensor masked = mask_first ? int_test::RunNode("Add", 14, {mask, scores})
                                       : int_test::RunNode("Add", 14, {scores, mask});
      Tensor expected = int_test::RunNode("Softmax", 13, {masked}, {{"axis", Attribute::Int(-1)}});
      std::vector<std::optional<Tensor>> quantize_inputs = {expected, y_scale};
      if (c.zero_type != DType::kUndefined) quantize_inputs.push_back(zero);
      if (c.quantize) expected = int_test::RunNode("QuantizeLinear", 19, quantize_inputs);

      std::vector<std::optional<Tensor>> inputs = {x, std::nullopt, mask, std::nullopt,
                                                   std::nullopt};
      if (byte_x) inputs[1] = table;
      if (c.quantize) inputs[3] = y_scale;
      if (c.quantize && c.zero_type != DType::kUndefined) inputs[4] = zero;
      for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2, &pool3}) {
        int_test::NodeRun how{.domain = kOctetDomain, .pool = pool, .runs = 2};
        if (mask_first) how.attributes["mask_first"] = Attribute::Int(1);
        const Tensor got = int_test::RunNode(kMaskedSoftmaxOp, 1, inputs, how);
        ASSERT_EQ(got.shape(), expected.shape()) << ShapeToString(c.x);
        ASSERT_EQ(got.dtype(), expected.dtype()) << ShapeToString(c.x);
        EXPECT_EQ(std::memcmp(got.raw(), expected.raw(), got.nbytes()), 0)
            << ShapeToString(c.x) << " mask " << ShapeToString(c.mask) << " mask_first "
            << mask_first << " threads " << (pool ? pool->num_threads() : 1);
      }
    }
}

TEST(MaskedSoftmax, ExpTablesOfAConstantTableGiveTheSeparateNodesBits) {
  // A constant table: rows whose mask values are +0 / -0, or far below the
  // scores (-10000, -inf), take their exps from tables made at creation (ties
  // in the table and a row-broadcast mask included); a mask value near the
  // scores (-50), a fully masked row, and a table with -0 or infinity cannot.
  ThreadPool pool2(2);
  uint32_t seed = 500;
  for (int64_t n : {1, 17, 128, 129})
    for (DType x_type : {DType::kUInt8, DType::kInt8})
      for (int table_kind = 0; table_kind < 4; ++table_kind) {
        const Tensor x = RandomBytes({5, 2, 5, n}, x_type, seed++);
        Tensor table = Random({256}, seed++, 6.f);
        float* t = table.data<float>();
        if (table_kind == 1) {  // ties: scores of a DequantizeLinear with a coarse scale
          for (int k = 0; k < 256; ++k) t[k] = static_cast<float>((k * 7) % 23 - 11) * 0.125f;
        }
        if (table_kind == 2) t[200] = -0.0f;
        if (table_kind == 3) t[3] = std::numeric_limits<float>::infinity();
        for (bool broadcast_row : {false, true}) {
          Tensor mask(DType::kFloat32, {5, 1, 1, broadcast_row ? 1 : n});
          float* m = mask.data<float>();
          const int64_t row = broadcast_row ? 1 : n;
          for (int64_t i = 0; i < row; ++i) {
            m[i] = 0.0f;                                         // batch 0: +0
            for (int b = 1; b < 5; ++b) m[b * row + i] = -0.0f;  // (1 - 1) * -10000
          }
          m[2 * row + row - 1] = -10000.f;  // padding
          m[3 * row] = -50.f;               // too near the scores: the general path
          m[4 * row + row / 2] = -std::numeric_limits<float>::infinity();
          const Tensor scores = int_test::RunNode(kLookupTableOp, 1, {x, table},
                                                  int_test::NodeRun{.domain = kOctetDomain});
          const Tensor probs =
              int_test::RunNode("Softmax", 13, {int_test::RunNode("Add", 14, {scores, mask})},
                                {{"axis", Attribute::Int(-1)}});
          const Tensor y_scale = Scalar(DType::kFloat32, 1.f / 255);
          const Tensor zero = Scalar(x_type, x_type == DType::kInt8 ? -128.f : 0.f);
          const Tensor expected = int_test::RunNode("QuantizeLinear", 19, {probs, y_scale, zero});
          for (bool quantize : {true, false}) {
            for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2}) {
              int_test::NodeRun how{
                  .domain = kOctetDomain, .constant = {false, true}, .pool = pool, .runs = 2};
              const Tensor got = int_test::RunNode(
                  kMaskedSoftmaxOp, 1,
                  {x, table, mask, quantize ? std::optional<Tensor>(y_scale) : std::nullopt,
                   quantize ? std::optional<Tensor>(zero) : std::nullopt},
                  how);
              const Tensor& want = quantize ? expected : probs;
              ASSERT_EQ(got.nbytes(), want.nbytes());
              EXPECT_EQ(std::memcmp(got.raw(), want.raw(), got.nbytes()), 0)
                  << "n " << n << " " << DTypeName(x_type) << " table " << table_kind
                  << " broadcast " << broadcast_row << " quantize " << quantize;
            }
          }
        }
      }
}

TEST(MaskedSoftmax, KeepsTheLookupsMinimumRank) {
  const Tensor x = RandomBytes({5, 7}, DType::kUInt8, 1), table = Random({256}, 2, 2.f);
  const Tensor mask = Random({7}, 3, 1.f);
  const Tensor scores = int_test::RunNode(
      kLookupTableOp, 1, {x, table},
      int_test::NodeRun{.domain = kOctetDomain, .attributes = {{"min_rank", Attribute::Int(3)}}});
  const Tensor expected =
      int_test::RunNode("Softmax", 13, {int_test::RunNode("Add", 14, {scores, mask})},
                        {{"axis", Attribute::Int(-1)}});
  const Tensor got = int_test::RunNode(
      kMaskedSoftmaxOp, 1, {x, table, mask, std::nullopt, std::nullopt},
      int_test::NodeRun{.domain = kOctetDomain, .attributes = {{"min_rank", Attribute::Int(3)}}});
  ASSERT_EQ(got.shape(), (Shape{1, 5, 7}));
  EXPECT_EQ(std::memcmp(got.raw(), expected.raw(), got.nbytes()), 0);
}

}  // namespace
}  // namespace octet
