// The no-op hook with libpq's library tree loaded (bench_hooks' process-start
// floor): it calls libpq once, so the linker keeps it, and does nothing else.
#include <libpq-fe.h>

int main()
{
    return PQlibVersion() > 0 ? 0 : 1;
}
