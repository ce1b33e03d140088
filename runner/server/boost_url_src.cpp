// Boost.URL 1.81 compiled into this program (its header-only form), so no separate libboost_url is needed.
#include <boost/url/src.hpp>
