#include "common/url/url_path.hpp"

namespace orch {
namespace {

bool starts_with(std::string_view s, std::string_view prefix)
{
    return s.substr(0, prefix.size()) == prefix;
}

// Removes the last segment of `out` and the "/" before it.
void drop_last_segment(std::string& out)
{
    auto slash = out.rfind('/');
    out.erase(slash == std::string::npos ? 0 : slash);
}

} // namespace

std::string remove_dot_segments(std::string_view path)
{
    // The steps of RFC 3986 5.2.4 in its order, input consumed from the front.
    static constexpr std::string_view k_root = "/";
    std::string out;
    std::string_view in = path;
    while (!in.empty()) {
        if (starts_with(in, "../")) {
            in.remove_prefix(3);
        } else if (starts_with(in, "./")) {
            in.remove_prefix(2);
        } else if (starts_with(in, "/./")) {
            in.remove_prefix(2);
        } else if (in == "/.") {
            in = k_root;
        } else if (starts_with(in, "/../")) {
            in.remove_prefix(3);
            drop_last_segment(out);
        } else if (in == "/..") {
            in = k_root;
            drop_last_segment(out);
        } else if (in == "." || in == "..") {
            in = {};
        } else {
            auto end = in.find('/', 1);
            auto segment = in.substr(0, end);
            out += segment;
            in.remove_prefix(segment.size());
        }
    }
    return out;
}

} // namespace orch
