#pragma once

// The one way to include Boost.Process v2 in this project. With
// BOOST_PROCESS_USE_STD_FS (set by the build), the 1.81 headers use these two
// without including them.
#include <boost/optional.hpp>
#include <boost/type_traits.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/process/v2/process.hpp>
#include <boost/process/v2/stdio.hpp>
#include <boost/process/v2/start_dir.hpp>
#include <boost/process/v2/environment.hpp>
#include <boost/process/v2/posix/vfork_launcher.hpp>

namespace bp = boost::process::v2;
