#include "common/base/errors.hpp"

#include <cerrno>
#include <system_error>

namespace orch {

void throw_errno(const std::string& what)
{
    throw std::system_error(errno, std::generic_category(), what);
}

} // namespace orch
