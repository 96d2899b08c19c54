// A few SVG primitives for the doc figures: boxes, text, lines and arrows on a canvas of a given size.
// Every figure of docs/img/ that is not a pipeline timeline or an autograd graph is drawn with these.
#pragma once

#include <sstream>
#include <string>

#include "tensor/xml_escape.h"

namespace brigade::figures {

class Svg {
 public:
  Svg(double width, double height) : width_(width), height_(height) {}

  void rect(double x, double y, double w, double h, const std::string& fill,
            const std::string& stroke = "#555", double stroke_width = 0.6) {
    body_ << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"" << w << "\" height=\"" << h << "\" fill=\""
          << fill << "\" stroke=\"" << stroke << "\" stroke-width=\"" << stroke_width << "\"/>\n";
  }
  /// anchor: "start", "middle" or "end".
  void text(double x, double y, const std::string& s, double size = 12, const std::string& anchor = "start",
            const std::string& fill = "#222", bool bold = false) {
    body_ << "<text x=\"" << x << "\" y=\"" << y << "\" font-size=\"" << size << "\" text-anchor=\"" << anchor
          << "\" fill=\"" << fill << "\"" << (bold ? " font-weight=\"bold\"" : "") << ">" << xml_escape(s)
          << "</text>\n";
  }
  void line(double x0, double y0, double x1, double y1, const std::string& stroke = "#555", double width = 1,
            bool arrow = false) {
    body_ << "<line x1=\"" << x0 << "\" y1=\"" << y0 << "\" x2=\"" << x1 << "\" y2=\"" << y1 << "\" stroke=\""
          << stroke << "\" stroke-width=\"" << width << "\"" << (arrow ? " marker-end=\"url(#arrow)\"" : "")
          << "/>\n";
  }

  std::string str() const {
    std::ostringstream out;
    out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width_ << "\" height=\"" << height_
        << "\" viewBox=\"0 0 " << width_ << " " << height_ << "\" font-family=\"sans-serif\">\n"
        << "<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" "
           "markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"#555\"/>"
           "</marker></defs>\n"
        << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
        << body_.str() << "</svg>\n";
    return out.str();
  }

 private:
  double width_, height_;
  std::ostringstream body_;
};

}  // namespace brigade::figures
