// graph_to_svg: a layered drawing of collect_graph's nodes, with no layout library.
//
// Rows are depths (the root on top). Within a row the boxes start in the order the breadth-first walk met
// them; two sweeps then sort each row by the mean x of the boxes pointing into it (the barycentre
// heuristic), which removes most crossings in the chains and small fans an autograd graph is made of.
// Box widths come from the label length at a fixed character width: the text is monospace.
#include <algorithm>
#include <map>
#include <sstream>

#include "autograd/graph_dump.h"
#include "tensor/xml_escape.h"

namespace brigade::autograd {
namespace {

constexpr double kCharWidth = 6.6;       // 11 px monospace
constexpr double kLabelCharWidth = 5.4;  // the edge labels' 9 px
constexpr double kGap = 28, kRowHeight = 86, kMargin = 20;

struct Box {
  double x = 0, y = 0, width = 0, height = 0;  // x, y: top-left corner
};

double box_width(const GraphNode& g) {
  const size_t chars = std::max(g.op.size(), g.detail.size());
  return static_cast<double>(chars) * kCharWidth + 16;
}

// Rows of node indices by depth, ordered by the barycentre of their parents' positions.
std::vector<std::vector<int>> ordered_rows(const std::vector<GraphNode>& nodes) {
  int max_depth = 0;
  for (const auto& g : nodes) max_depth = std::max(max_depth, g.depth);
  std::vector<std::vector<int>> rows(static_cast<size_t>(max_depth) + 1);
  for (size_t i = 0; i < nodes.size(); ++i)
    rows[static_cast<size_t>(nodes[i].depth)].push_back(static_cast<int>(i));
  std::vector<std::vector<int>> parents(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (const auto& e : nodes[i].edges) parents[static_cast<size_t>(e.to)].push_back(static_cast<int>(i));
  }
  for (int sweep = 0; sweep < 2; ++sweep) {
    std::vector<double> position(nodes.size(), 0);
    for (const auto& row : rows) {
      for (size_t k = 0; k < row.size(); ++k) position[static_cast<size_t>(row[k])] = static_cast<double>(k);
    }
    for (size_t r = 1; r < rows.size(); ++r) {
      std::map<int, double> key;
      for (int n : rows[r]) {
        double sum = 0;
        for (int p : parents[static_cast<size_t>(n)]) sum += position[static_cast<size_t>(p)];
        const auto count = static_cast<double>(parents[static_cast<size_t>(n)].size());
        key[n] = count > 0 ? sum / count : position[static_cast<size_t>(n)];
      }
      std::stable_sort(rows[r].begin(), rows[r].end(), [&](int a, int b) { return key[a] < key[b]; });
      for (size_t k = 0; k < rows[r].size(); ++k)
        position[static_cast<size_t>(rows[r][k])] = static_cast<double>(k);
    }
  }
  return rows;
}

// Boxes packed left to right in each row, every row centred on the widest one.
std::vector<Box> place(const std::vector<GraphNode>& nodes, const std::vector<std::vector<int>>& rows,
                       double& width) {
  std::vector<Box> boxes(nodes.size());
  std::vector<double> row_width(rows.size(), 0);
  for (size_t r = 0; r < rows.size(); ++r) {
    for (int n : rows[r]) row_width[r] += box_width(nodes[static_cast<size_t>(n)]) + kGap;
    row_width[r] -= kGap;
  }
  width = *std::max_element(row_width.begin(), row_width.end()) + 2 * kMargin;
  for (size_t r = 0; r < rows.size(); ++r) {
    double x = (width - row_width[r]) / 2;
    for (int n : rows[r]) {
      const GraphNode& g = nodes[static_cast<size_t>(n)];
      Box& b = boxes[static_cast<size_t>(n)];
      b = {x, kMargin + static_cast<double>(r) * kRowHeight, box_width(g), g.detail.empty() ? 22.0 : 36.0};
      x += b.width + kGap;
    }
  }
  return boxes;
}

const char* fill_of(const GraphNode& g, size_t index) {
  if (index == 0) return "#fff3c4";                // the root tensor
  if (g.op == "AccumulateGrad") return "#dbeafe";  // a leaf's gradient sink
  return "#ffffff";
}

}  // namespace

std::string graph_to_svg(const Tensor& root, const NamedTensors& names) {
  const std::vector<GraphNode> nodes = collect_graph(root, names);
  const std::vector<std::vector<int>> rows = ordered_rows(nodes);
  double width = 0;
  const std::vector<Box> boxes = place(nodes, rows, width);
  const double height = 2 * kMargin + static_cast<double>(rows.size() - 1) * kRowHeight + 36;
  for (size_t i = 0; i < nodes.size();
       ++i) {  // an edge label sits right of its edge's midpoint: keep it inside
    for (const auto& e : nodes[i].edges) {
      const Box& from = boxes[i];
      const Box& to = boxes[static_cast<size_t>(e.to)];
      const double label_end = (from.x + from.width / 2 + to.x + to.width / 2) / 2 + 4 +
                               static_cast<double>(e.label.size()) * kLabelCharWidth;
      width = std::max(width, label_end + kMargin);
    }
  }

  std::ostringstream out;
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
      << "\" font-family=\"monospace\" font-size=\"11\">\n"
      << "<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"7\" "
         "markerHeight=\"7\" orient=\"auto\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"#555\"/></marker></defs>\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"#fafafa\"/>\n";
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Box& from = boxes[i];
    for (const auto& e : nodes[i].edges) {
      const Box& to = boxes[static_cast<size_t>(e.to)];
      const double x1 = from.x + from.width / 2, y1 = from.y + from.height;
      const double x2 = to.x + to.width / 2, y2 = to.y;
      out << "<line x1=\"" << x1 << "\" y1=\"" << y1 << "\" x2=\"" << x2 << "\" y2=\"" << y2
          << "\" stroke=\"#555\" marker-end=\"url(#arrow)\"/>\n";
      if (!e.label.empty()) {
        out << "<text x=\"" << (x1 + x2) / 2 + 4 << "\" y=\"" << (y1 + y2) / 2
            << "\" font-size=\"9\" fill=\"#666\">" << xml_escape(e.label) << "</text>\n";
      }
    }
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    const GraphNode& g = nodes[i];
    const Box& b = boxes[i];
    out << "<rect x=\"" << b.x << "\" y=\"" << b.y << "\" width=\"" << b.width << "\" height=\"" << b.height
        << "\" rx=\"4\" fill=\"" << fill_of(g, i) << "\" stroke=\"#333\""
        << (g.released ? " stroke-dasharray=\"4 3\"" : "") << "/>\n";
    out << "<text x=\"" << b.x + b.width / 2 << "\" y=\"" << b.y + 15 << "\" text-anchor=\"middle\">"
        << xml_escape(g.op) << "</text>\n";
    if (!g.detail.empty()) {
      out << "<text x=\"" << b.x + b.width / 2 << "\" y=\"" << b.y + 29
          << "\" text-anchor=\"middle\" fill=\"#444\">" << xml_escape(g.detail) << "</text>\n";
    }
  }
  out << "</svg>\n";
  return out.str();
}

}  // namespace brigade::autograd
