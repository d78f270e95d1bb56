// What the rewrite passes did to one graph: candidate groups, how many became
// fused nodes, and the refusals counted by (reason, operator). Every decision is
// also kept in order as a record for `octet inspect`.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "graph/graph.h"

namespace octet {

struct QdqRecord {
  std::string node;    // the node the group is named after (its MatMul, Add, ...)
  std::string op;      // that node's op_type
  bool fused = false;  // true: rewritten; false: refused, kept as written
  std::string detail;  // what it became, or the refusal reason
};

struct QdqReport {
  int groups = 0;
  int claimed = 0;
  std::map<std::pair<std::string, std::string>, int> refused;
  std::vector<QdqRecord> records;

  void Refuse(const std::string& why, const Node& at);
  void Fuse(const Node& at, const std::string& became);
};

// The OCTET_QDQ_DEBUG lines for one graph: one `qdq_refused why=<reason>
// op=<op> count=<n>` per reason, then `qdq_groups=<n> claimed=<n>`.
std::string FormatQdqReport(const QdqReport& report);

}  // namespace octet
