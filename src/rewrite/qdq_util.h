// Helpers shared by the QDQ passes in rewrite/: reading constant Q/DQ
// parameters, ONNX Runtime's float steps for one 8-bit value (so a rewrite can
// prove itself exact by enumerating all 256 inputs), and graph edits.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace octet {

bool IsQdqDomain(const Node& n);
bool IsDequantizeNode(const Node& n);
bool IsQuantizeNode(const Node& n);

int InputAt(const Node& n, size_t i);  // -1 when omitted
const Tensor* ConstantValue(const Graph& g, int value);

// The dtype of a value as far as the graph says without running kernels
// (kUndefined when it does not).
DType KnownDType(const Graph& g, int value);

// One per-tensor Q or DQ parameter set read from constants.
struct ScalarQParams {
  float scale = 1.f;
  int32_t zero = 0;
  DType type = DType::kUndefined;  // the 8-bit side's type
};

// Reads a QuantizeLinear / DequantizeLinear whose scale and zero point are
// one-value float32 / 8-bit constants; returns the reason when it is not one.
std::string ReadScalarQdq(const Graph& g, const Node& n, ScalarQParams& p);

// ONNX Runtime's DequantizeLinear of one value: float(q - zero) * scale.
float DequantizeValue(int32_t q, const ScalarQParams& p);
// ONNX Runtime's QuantizeLinear of one value (MLAS): x / scale clamped in float
// to the range shifted by the zero point, rounded half to even, plus the zero point.
int32_t QuantizeValue(float x, const ScalarQParams& p);
int32_t QMin(DType t);  // 8-bit types only
int32_t QMax(DType t);

// Consumers of every value, by node index.
std::vector<std::vector<int>> ConsumersOf(const Graph& g);
// The one node that reads `value`, or -1 when there are several, none, or the
// value is a graph output.
int SoleConsumer(const Graph& g, const std::vector<std::vector<int>>& consumers, int value);

// Removes the marked nodes and recomputes every value's producer.
void RemoveNodes(Graph& g, const std::vector<bool>& removed);

// Sets an int attribute on a node.
void SetIntAttribute(Node& n, const char* name, int64_t value);

}  // namespace octet
