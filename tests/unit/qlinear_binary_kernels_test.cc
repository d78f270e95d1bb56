// The quantized binary spans (kernels/int8/qlinear_binary.h) on every
// instruction-set path, and the operators' broadcasting onto spans, against
// the documented formulas written out independently here (ORT's float order:
// float32 steps evaluated in double and rounded once each, which gives the
// float32 result for +, *, /; fma through std::fma). Operands contiguous or
// one value for the span, lengths around the vector widths, misaligned
// starts, zero points on the type limits, ties, NaN and infinite scales, ORT's
// uint8 shift. Every span ends right before an inaccessible page.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "graph/octet_ops.h"
#include "guarded_buffer.h"
#include "int_op_test_util.h"
#include "kernels/float/broadcast.h"
#include "kernels/int8/qlinear_binary.h"
#include "rewrite/qdq_binary.h"
#include "rewrite/qdq_matmul.h"

namespace octet {
namespace {

using int_test::RoundHalfEven;
using int_test::TypeMax;
using int_test::TypeMin;

float F(double v) { return static_cast<float>(v); }

// cvtps2dq: NaN and values outside int32 give INT32_MIN; else round half to even.
int64_t Cvt(float v) {
  if (!(v >= -2147483648.0 && v < 2147483648.0)) return std::numeric_limits<int32_t>::min();
  return static_cast<int64_t>(RoundHalfEven(v));
}

int64_t Clamp(int64_t v, int64_t lo, int64_t hi) { return std::min(std::max(v, lo), hi); }

// One operator's parameters, as the test states them.
struct Spec {
  QBinaryArithmetic arithmetic;
  DType a_type, b_type, c_type;               // stored types
  int shift_a = 0, shift_b = 0, shift_c = 0;  // ORT's move to uint8 (QLinear forms)
  float sa, sb, sc;
  int za, zb, zc;         // of the stored types
  bool scalar_a = false;  // QLinearAdd: ORT's swapped call
};

int ByteValue(uint8_t byte, DType type) {
  return type == DType::kInt8 ? static_cast<int8_t>(byte) : byte;
}

// The stored byte of C for stored bytes a and b (docs/qdq.md, "Binary ops").
uint8_t Expected(const Spec& s, uint8_t a_byte, uint8_t b_byte) {
  const bool shifted = s.shift_c != 0;
  const DType qtype = shifted ? DType::kUInt8 : s.c_type;  // the QLinear forms' T
  const int64_t a = ByteValue(a_byte, s.a_type) + s.shift_a;
  const int64_t b = ByteValue(b_byte, s.b_type) + s.shift_b;
  const int64_t za = s.za + s.shift_a, zb = s.zb + s.shift_b, zc = s.zc + s.shift_c;
  int64_t v = 0;
  switch (s.arithmetic) {
    case QBinaryArithmetic::kQLinearAdd: {
      const float ra = F(double{s.sa} / s.sc), rb = F(double{s.sb} / s.sc);
      const float fa = static_cast<float>(a), fb = static_cast<float>(b);
      const float fza = static_cast<float>(za), fzb = static_cast<float>(zb);
      const float fzc = static_cast<float>(zc);
      if (s.scalar_a) {
        const float fixed = F(double{fzc} - std::fma(rb, fzb, F(double{ra} * fza)));
        v = Cvt(std::fma(fb, rb, std::fma(fa, ra, fixed)));
      } else {
        const float fixed = F(double{fzc} - std::fma(ra, fza, F(double{rb} * fzb)));
        v = Cvt(std::fma(fa, ra, std::fma(fb, rb, fixed)));
      }
      v = Clamp(v, TypeMin(qtype), TypeMax(qtype));
      break;
    }
    case QBinaryArithmetic::kQLinearMul: {
      const float r = F(double{F(double{s.sa} * s.sb)} / s.sc);
      const float product = F(static_cast<double>(static_cast<float>((a - za) * (b - zb))) * r);
      v = Clamp(Cvt(F(double{product} + static_cast<float>(zc))), TypeMin(qtype), TypeMax(qtype));
      break;
    }
    default: {
      const float x = F(static_cast<double>(static_cast<float>(a - za)) * s.sa);
      const float y = F(static_cast<double>(static_cast<float>(b - zb)) * s.sb);
      const float r =
          s.arithmetic == QBinaryArithmetic::kFloatAdd ? F(double{x} + y) : F(double{x} * y);
      const float scaled = F(double{r} / s.sc);
      const double lo = TypeMin(s.c_type) - zc, hi = TypeMax(s.c_type) - zc;
      const double clamped = std::isnan(scaled) ? lo : std::min(std::max<double>(scaled, lo), hi);
      v = static_cast<int64_t>(RoundHalfEven(clamped)) + zc;
      break;
    }
  }
  return static_cast<uint8_t>(v - s.shift_c);
}

QBinaryProgram ProgramOf(const Spec& s) {
  if (s.arithmetic == QBinaryArithmetic::kFloatAdd || s.arithmetic == QBinaryArithmetic::kFloatMul)
    return QdqFloatBinaryProgram({s.sa, s.za, s.a_type}, {s.sb, s.zb, s.b_type},
                                 {s.sc, s.zc, s.c_type},
                                 s.arithmetic == QBinaryArithmetic::kFloatAdd);
  QLinearBinaryParams p;
  p.type = s.shift_c != 0 ? DType::kUInt8 : s.c_type;
  p.a_scale = s.sa;
  p.b_scale = s.sb;
  p.c_scale = s.sc;
  p.a_zero = s.za + s.shift_a;
  p.b_zero = s.zb + s.shift_b;
  p.c_zero = s.zc + s.shift_c;
  QBinaryProgram q = s.arithmetic == QBinaryArithmetic::kQLinearAdd
                         ? QLinearAddProgram(p, s.scalar_a)
                         : QLinearMulProgram(p);
  q.a_signed = s.a_type == DType::kInt8;
  q.b_signed = s.b_type == DType::kInt8;
  q.a_offset = s.shift_a;
  q.b_offset = s.shift_b;
  q.c_offset = s.shift_c;
  return q;
}

// Operand B dequantized as the float steps form it: float(b - zb) * sb.
std::vector<float> DequantizedB(const Spec& s, const uint8_t* b, int64_t count) {
  std::vector<float> out(count);
  for (int64_t i = 0; i < count; ++i)
    out[i] = F(static_cast<double>(static_cast<float>(ByteValue(b[i], s.b_type) - s.zb)) * s.sb);
  return out;
}

bool IsFloatSteps(QBinaryArithmetic arithmetic) {
  return arithmetic == QBinaryArithmetic::kFloatAdd || arithmetic == QBinaryArithmetic::kFloatMul;
}

int RandomZero(DType t, std::mt19937& rng) {
  switch (rng() % 4) {
    case 0:
      return TypeMin(t);
    case 1:
      return TypeMax(t);
    default:
      return TypeMin(t) + static_cast<int>(rng() % 256);
  }
}

float RandomScale(std::mt19937& rng) {
  static const float kSpecial[] = {0.5f,
                                   1.f,
                                   0.25f,
                                   2.f,
                                   1e-3f,
                                   1e30f,
                                   std::numeric_limits<float>::infinity(),
                                   std::numeric_limits<float>::quiet_NaN(),
                                   std::numeric_limits<float>::denorm_min()};
  if (rng() % 6 == 0) return kSpecial[rng() % (sizeof(kSpecial) / sizeof(kSpecial[0]))];
  return std::ldexp(0.5f + static_cast<float>(rng() % 1000) / 2000.f,
                    static_cast<int>(rng() % 12) - 8);
}

Spec RandomSpec(QBinaryArithmetic arithmetic, std::mt19937& rng) {
  const DType types[] = {DType::kUInt8, DType::kInt8};
  Spec s{};
  s.arithmetic = arithmetic;
  const bool qlinear =
      arithmetic == QBinaryArithmetic::kQLinearAdd || arithmetic == QBinaryArithmetic::kQLinearMul;
  s.a_type = types[rng() % 2];
  // QLinear forms have one type T; the float steps mix them freely.
  s.b_type = qlinear ? s.a_type : types[rng() % 2];
  s.c_type = qlinear ? s.a_type : types[rng() % 2];
  if (qlinear && s.a_type == DType::kInt8 && rng() % 2) {
    // ORT moved every int8 tensor to uint8: values and zero points + 128.
    s.shift_a = s.shift_b = s.shift_c = 128;
  }
  s.sa = RandomScale(rng);
  s.sb = RandomScale(rng);
  s.sc = RandomScale(rng);
  s.za = RandomZero(s.a_type, rng);
  s.zb = RandomZero(s.b_type, rng);
  s.zc = RandomZero(s.c_type, rng);
  s.scalar_a = rng() % 2;
  return s;
}

std::string Describe(const Spec& s) {
  return "arithmetic " + std::to_string(static_cast<int>(s.arithmetic)) + " types " +
         DTypeName(s.a_type) + "," + DTypeName(s.b_type) + "," + DTypeName(s.c_type) + " shift " +
         std::to_string(s.shift_c) + " scales " + std::to_string(s.sa) + "," +
         std::to_string(s.sb) + "," + std::to_string(s.sc) + " zeros " + std::to_string(s.za) +
         "," + std::to_string(s.zb) + "," + std::to_string(s.zc) + " scalar_a " +
         std::to_string(s.scalar_a);
}

TEST(QBinaryKernels, EveryPathMatchesTheFormulaOnEverySpanForm) {
  std::mt19937 rng(53);
  const QBinaryArithmetic arithmetics[] = {
      QBinaryArithmetic::kQLinearAdd, QBinaryArithmetic::kQLinearMul, QBinaryArithmetic::kFloatAdd,
      QBinaryArithmetic::kFloatMul};
  const int64_t lengths[] = {0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 1000};
  for (QBinaryArithmetic arithmetic : arithmetics) {
    for (int trial = 0; trial < 12; ++trial) {
      const Spec spec = RandomSpec(arithmetic, rng);
      const QBinaryProgram program = ProgramOf(spec);
      for (int64_t n : lengths) {
        for (int form = 0; form < 4; ++form) {  // a_step, b_step in {1, 0}
          const int64_t a_step = form & 1 ? 0 : 1, b_step = form & 2 ? 0 : 1;
          const int64_t misalign = (n + form) % 3;
          const int64_t a_count = a_step != 0 ? n : 1, b_count = b_step != 0 ? n : 1;
          GuardedBuffer<uint8_t> a(a_count + misalign), b(b_count + misalign);
          for (int64_t i = 0; i < a_count + misalign; ++i) a[i] = static_cast<uint8_t>(rng());
          for (int64_t i = 0; i < b_count + misalign; ++i) b[i] = static_cast<uint8_t>(rng());
          const uint8_t* pa = a.data() + misalign;
          const uint8_t* pb = b.data() + misalign;
          std::vector<uint8_t> expected(n);
          for (int64_t i = 0; i < n; ++i)
            expected[i] = Expected(spec, pa[i * a_step], pb[i * b_step]);
          for (Isa isa : SupportedIsas()) {
            SCOPED_TRACE(std::string(IsaName(isa)) + " n " + std::to_string(n) + " steps " +
                         std::to_string(a_step) + "," + std::to_string(b_step) + " " +
                         Describe(spec));
            GuardedBuffer<uint8_t> c(n + misalign);
            std::memset(c.data(), 0xA5, n + misalign);
            QBinarySpan(program, pa, a_step, pb, b_step, c.data() + misalign, n, isa);
            ASSERT_EQ(std::vector<uint8_t>(c.data() + misalign, c.data() + misalign + n), expected);
            for (int64_t i = 0; i < misalign; ++i) ASSERT_EQ(c[i], 0xA5) << "wrote before";
            if (!IsFloatSteps(arithmetic)) continue;
            // B given dequantized (a constant operand), also ending before a guard page.
            const std::vector<float> floats = DequantizedB(spec, pb, b_count);
            GuardedBuffer<float> fb(b_count);
            for (int64_t i = 0; i < b_count; ++i) fb[i] = floats[i];
            std::memset(c.data(), 0xA5, n + misalign);
            QBinaryFloatOperandSpan(program, pa, a_step, fb.data(), b_step, c.data() + misalign, n,
                                    isa);
            ASSERT_EQ(std::vector<uint8_t>(c.data() + misalign, c.data() + misalign + n), expected)
                << "dequantized B";
            for (int64_t i = 0; i < misalign; ++i) ASSERT_EQ(c[i], 0xA5) << "wrote before";
          }
        }
      }
    }
  }
}

TEST(QBinaryKernels, FullGridOfBytesWithTiesOnEveryPath) {
  // Scales that make many results land exactly on .5: every (a, b) pair.
  const Spec specs[] = {
      {QBinaryArithmetic::kQLinearAdd, DType::kUInt8, DType::kUInt8, DType::kUInt8, 0, 0, 0, 0.5f,
       0.25f, 1.f, 128, 0, 255},
      {QBinaryArithmetic::kQLinearAdd, DType::kInt8, DType::kInt8, DType::kInt8, 128, 128, 128,
       0.5f, 1.5f, 2.f, -128, 127, 0, true},
      {QBinaryArithmetic::kQLinearMul, DType::kInt8, DType::kInt8, DType::kInt8, 0, 0, 0, 0.5f,
       0.5f, 2.f, 0, -128, 127},
      {QBinaryArithmetic::kFloatAdd, DType::kInt8, DType::kUInt8, DType::kUInt8, 0, 0, 0, 0.5f,
       0.25f, 1.f, -128, 255, 0},
      {QBinaryArithmetic::kFloatMul, DType::kUInt8, DType::kInt8, DType::kInt8, 0, 0, 0, 0.5f, 0.5f,
       4.f, 0, 0, -128},
  };
  std::vector<uint8_t> a(256 * 256), b(256 * 256);
  for (int i = 0; i < 256 * 256; ++i) {
    a[i] = static_cast<uint8_t>(i / 256);
    b[i] = static_cast<uint8_t>(i % 256);
  }
  for (const Spec& spec : specs) {
    std::vector<uint8_t> expected(a.size());
    for (size_t i = 0; i < a.size(); ++i) expected[i] = Expected(spec, a[i], b[i]);
    for (Isa isa : SupportedIsas()) {
      SCOPED_TRACE(std::string(IsaName(isa)) + " " + Describe(spec));
      std::vector<uint8_t> c(a.size());
      QBinarySpan(ProgramOf(spec), a.data(), 1, b.data(), 1, c.data(),
                  static_cast<int64_t>(c.size()), isa);
      ASSERT_EQ(c, expected);
      if (!IsFloatSteps(spec.arithmetic)) continue;
      const std::vector<float> fb = DequantizedB(spec, b.data(), static_cast<int64_t>(b.size()));
      std::fill(c.begin(), c.end(), 0);
      QBinaryFloatOperandSpan(ProgramOf(spec), a.data(), 1, fb.data(), 1, c.data(),
                              static_cast<int64_t>(c.size()), isa);
      ASSERT_EQ(c, expected) << "dequantized B";
    }
  }
}

// Cases built so that a fused multiply-add gives another byte than ORT's
// rounded product followed by the addition (each derived in its comment).
TEST(QBinaryKernels, ProductsAreRoundedBeforeTheAddition) {
  struct Crafted {
    Spec spec;
    uint8_t a, b, expected;
  };
  const float one_up = 1.f + std::ldexp(1.f, -23);        // 1 + 2^-23
  const float big = 125.5f + std::ldexp(1.f, -16);        // exact in float
  const float ratio = 15379115.f * std::ldexp(1.f, -23);  // 3 * ratio = 5.5 + 2^-23
  const auto i8 = [](int v) { return static_cast<uint8_t>(static_cast<int8_t>(v)); };
  const Crafted cases[] = {
      // x = 127 * (1 + 2^-23) rounds to 127 + 2^-16; x + y = 1.5 exactly, a tie -> 2.
      // Fused: 1.5 - 2^-23 -> 1.
      {{QBinaryArithmetic::kFloatAdd, DType::kInt8, DType::kInt8, DType::kInt8, 0, 0, 0, one_up,
        big, 1.f, 0, 0, 0},
       i8(127),
       i8(-1),
       2},
      // The same with A and B trading places.
      {{QBinaryArithmetic::kFloatAdd, DType::kInt8, DType::kInt8, DType::kInt8, 0, 0, 0, big,
        one_up, 1.f, 0, 0, 0},
       i8(-1),
       i8(127),
       2},
      // 3 * ratio = 5.5 + 2^-23 rounds to 5.5; 5.5 - 5 = 0.5, a tie -> 0. Fused: 0.5 + 2^-23 -> 1.
      {{QBinaryArithmetic::kQLinearMul, DType::kInt8, DType::kInt8, DType::kInt8, 0, 0, 0, ratio,
        1.f, 1.f, 0, 0, -5},
       i8(3),
       i8(1),
       0},
  };
  for (const Crafted& c : cases) {
    ASSERT_EQ(Expected(c.spec, c.a, c.b), c.expected) << Describe(c.spec);
    std::vector<uint8_t> a(40, c.a), b(40, c.b);
    for (Isa isa : SupportedIsas()) {
      std::vector<uint8_t> out(40);
      QBinarySpan(ProgramOf(c.spec), a.data(), 1, b.data(), 1, out.data(), 40, isa);
      EXPECT_EQ(out, std::vector<uint8_t>(40, c.expected))
          << IsaName(isa) << " " << Describe(c.spec);
    }
  }
}

// The operators over numpy broadcasting, against a naive walk of the output
// (offsets from each output index) with the formula above; one and two threads,
// operands given at run time or as constants at creation.
int64_t BroadcastOffset(const Shape& in, const Shape& out, int64_t flat) {
  int64_t offset = 0, stride = 1;
  for (size_t k = 0; k < out.size(); ++k) {
    const size_t d = out.size() - 1 - k;
    const int64_t index = flat % out[d];
    flat /= out[d];
    if (k < in.size()) {
      const int64_t dim = in[in.size() - 1 - k];
      if (dim != 1) offset += index * stride;
      stride *= dim;
    }
  }
  return offset;
}

struct ShapeCase {
  Shape a, b;
  bool ort_scalar_a;  // A is the single value of each innermost span
};

TEST(QBinaryOps, BroadcastFormsMatchANaiveWalkOnOneAndTwoThreads) {
  const ShapeCase cases[] = {
      {{128, 384}, {128, 384}, false},        // same shape
      {{}, {3, 70}, true},                    // scalar A
      {{5, 70}, {}, false},                   // scalar B
      {{5, 70}, {1}, false},                  // one-element B
      {{128, 384}, {384}, false},             // last-axis broadcast (bias)
      {{384}, {128, 384}, false},             // ... on A
      {{128, 384}, {128, 1}, false},          // row broadcast of B
      {{128, 1}, {128, 384}, true},           // row broadcast of A
      {{1, 3, 20, 20}, {1, 3, 1, 1}, false},  // per-channel constant
      {{2, 3, 4, 5}, {3, 1, 5}, false},       // mixed
      {{7, 1}, {1, 9}, true},                 // outer product
      {{1, 9}, {7, 1}, false},
      {{2, 0, 3}, {3}, false},          // empty
      {{300, 257}, {300, 257}, false},  // large enough to split over threads
  };
  ThreadPool two_threads(2);
  std::mt19937 rng(59);
  for (const ShapeCase& sc : cases) {
    for (const char* op : {"QLinearAdd", "QLinearMul", "QdqAdd", "QdqMul"}) {
      const bool ms = op[0] == 'Q' && op[1] == 'L';
      const bool add = std::string(op).find("Add") != std::string::npos;
      Spec s{};
      s.arithmetic = ms ? (add ? QBinaryArithmetic::kQLinearAdd : QBinaryArithmetic::kQLinearMul)
                        : (add ? QBinaryArithmetic::kFloatAdd : QBinaryArithmetic::kFloatMul);
      s.a_type = DType::kUInt8;
      s.b_type = ms ? DType::kUInt8 : DType::kInt8;
      s.c_type = ms ? DType::kUInt8 : DType::kInt8;
      s.sa = 0.031f;
      s.sb = 0.017f;
      s.sc = add ? 0.045f : 0.013f;
      s.za = 128;
      s.zb = ms ? 3 : -5;
      s.zc = ms ? 100 : 7;
      s.scalar_a = ms && add && sc.ort_scalar_a;
      Tensor a = int_test::RandomInt8(s.a_type, sc.a, rng);
      Tensor b = int_test::RandomInt8(s.b_type, sc.b, rng);
      const std::vector<std::optional<Tensor>> inputs = {
          a,
          int_test::Scalar(s.sa),
          int_test::ZeroPoints(s.a_type, {}, {s.za}),
          b,
          int_test::Scalar(s.sb),
          int_test::ZeroPoints(s.b_type, {}, {s.zb}),
          int_test::Scalar(s.sc),
          int_test::ZeroPoints(s.c_type, {}, {s.zc})};
      std::map<std::string, Attribute> attributes;
      if (!ms) attributes["arithmetic"] = Attribute::String("float");
      const Shape out = BroadcastOrFail(sc.a, sc.b, [] { return "test"; });
      std::vector<uint8_t> expected(NumElements(out));
      const auto* pa = static_cast<const uint8_t*>(a.raw());
      const auto* pb = static_cast<const uint8_t*>(b.raw());
      for (int64_t i = 0; i < NumElements(out); ++i)
        expected[i] =
            Expected(s, pa[BroadcastOffset(sc.a, out, i)], pb[BroadcastOffset(sc.b, out, i)]);
      // Constant operands (the float steps dequantize one once): none, B with its
      // parameters, A with its parameters, A without its zero point input (za = 0 then).
      const std::vector<std::vector<bool>> constant_forms = {
          {}, {false, false, false, true, true, true}, {true, true, true}, {true, true, false}};
      for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &two_threads}) {
        for (size_t form = 0; form < constant_forms.size(); ++form) {
          SCOPED_TRACE(std::string(op) + " " + ShapeToString(sc.a) + " x " + ShapeToString(sc.b) +
                       (pool ? " two threads" : " one thread") + " constant form " +
                       std::to_string(form));
          const bool omit_a_zero = form == 3;
          std::vector<std::optional<Tensor>> run_inputs = inputs;
          std::vector<uint8_t> want = expected;
          if (omit_a_zero) {
            run_inputs[2] = std::nullopt;
            Spec s0 = s;
            s0.za = 0;
            for (int64_t i = 0; i < NumElements(out); ++i)
              want[i] = Expected(s0, pa[BroadcastOffset(sc.a, out, i)],
                                 pb[BroadcastOffset(sc.b, out, i)]);
          }
          const Tensor c = int_test::RunNode(ms ? op : (add ? kQdqAddOp : kQdqMulOp), 1, run_inputs,
                                             {.domain = ms ? kMsDomain : kOctetDomain,
                                              .attributes = attributes,
                                              .constant = constant_forms[form],
                                              .pool = pool,
                                              .runs = 2});
          ASSERT_EQ(c.shape(), out);
          const auto* pc = static_cast<const uint8_t*>(c.raw());
          ASSERT_EQ(std::vector<uint8_t>(pc, pc + c.numel()), want);
        }
      }
    }
  }
}

}  // namespace
}  // namespace octet
