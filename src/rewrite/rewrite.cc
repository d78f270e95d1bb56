#include "rewrite/rewrite.h"

#include <cstdlib>
#include <cstring>
#include <iostream>

#include "rewrite/qdq_matmul.h"

namespace octet {

namespace {

bool EnvIs(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, value) == 0;
}

}  // namespace

void ApplyRewrites(Graph& graph) {
  // OCTET_QDQ=0 is the control: the graph runs node by node, as written.
  if (EnvIs("OCTET_QDQ", "0")) return;
  const QdqReport report = FuseQdqMatMul(graph);
  if (EnvIs("OCTET_QDQ_DEBUG", "1")) std::cerr << FormatQdqReport(report) << std::flush;
}

}  // namespace octet
