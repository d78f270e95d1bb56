#include "rewrite/qdq_report.h"

#include <sstream>

namespace octet {

void QdqReport::Refuse(const std::string& why, const Node& at) {
  ++refused[{why, at.op_type}];
  records.push_back({at.name, at.op_type, false, why});
}

void QdqReport::Fuse(const Node& at, const std::string& became) {
  records.push_back({at.name, at.op_type, true, became});
}

std::string FormatQdqReport(const QdqReport& report) {
  std::ostringstream os;
  for (const auto& [key, count] : report.refused)
    os << "qdq_refused why=" << key.first << " op=" << key.second << " count=" << count << "\n";
  for (const QdqRecord& r : report.records)
    if (r.fused && r.detail.rfind("octet.LookupTable", 0) == 0)
      os << "qdq_lookup node='" << r.node << "' -> " << r.detail << "\n";
  os << "qdq_groups=" << report.groups << " claimed=" << report.claimed << "\n";
  return os.str();
}

}  // namespace octet
