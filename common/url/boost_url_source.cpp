// Boost.URL's compiled part. Debian's Boost 1.81 ships no libboost_url, and the
// library supports being built into its user from this one header instead.
#include <boost/url/src.hpp>
