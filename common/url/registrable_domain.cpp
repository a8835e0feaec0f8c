#include "common/url/registrable_domain.hpp"

#include <arpa/inet.h>
#include <libpsl.h>
#include <netinet/in.h>

#include <memory>

namespace orch {
namespace {

struct PslFree {
    void operator()(psl_ctx_t* p) const noexcept { psl_free(p); }
};

const psl_ctx_t* suffix_list()
{
    // psl_latest() gives the built-in list when the system's cannot be read.
    static const std::unique_ptr<psl_ctx_t, PslFree> latest(psl_latest(nullptr));
    return latest ? latest.get() : psl_builtin();
}

bool is_ip_address(const std::string& host)
{
    if (!host.empty() && host.front() == '[') {
        return true;
    }
    in_addr v4{};
    return inet_pton(AF_INET, host.c_str(), &v4) == 1;
}

} // namespace

std::string registrable_domain(std::string_view host)
{
    std::string name(host);
    // libpsl reads "127.0.0.1" as a name under the suffix "1".
    if (is_ip_address(name)) {
        return name;
    }
    const psl_ctx_t* list = suffix_list();
    const char* domain = list ? psl_registrable_domain(list, name.c_str()) : nullptr;
    return domain ? std::string(domain) : name;
}

} // namespace orch
