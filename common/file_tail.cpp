#include "common/file_tail.hpp"

#include "common/utf8.hpp"

#include <algorithm>
#include <fstream>

namespace orch {

std::string read_file_tail(const std::filesystem::path& path, std::size_t max_bytes)
{
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in) {
        return {};
    }
    const auto size = static_cast<std::size_t>(in.tellg());
    const auto start = size > max_bytes ? size - max_bytes : 0;
    in.seekg(static_cast<std::streamoff>(start));
    std::string data(size - start, '\0');
    in.read(data.data(), static_cast<std::streamsize>(data.size()));
    data.resize(static_cast<std::size_t>(in.gcount()));
    // PostgreSQL text rejects NUL as well as ill-formed UTF-8.
    std::replace(data.begin(), data.end(), '\0', '?');
    return sanitize_utf8(data);
}

} // namespace orch
