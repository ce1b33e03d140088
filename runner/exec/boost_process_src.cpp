// Boost.Process v2 (Boost 1.81) is not header-only: its out-of-line definitions are compiled here, once.
#include <boost/process/v2/src.hpp>
