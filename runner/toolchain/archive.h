#pragma once
// Hardened extraction of tar.gz and zip archives with libarchive.
//
// An archive is data from the network: nothing in it may write outside the install root or plant something
// that later reads outside it. Refused: absolute paths, `..` components, symlinks whose target leaves the
// root (checked again on the finished tree, physically, with every link resolved), hardlinks to anything but
// a regular file extracted earlier inside the root, device files, fifos and sockets, and archives over the
// size or entry-count cap or that expand absurdly (max_ratio). Regular files keep their execute bits; owners are never applied.
#include <string>

namespace pto {

struct ExtractLimits {
  long long max_bytes = 4LL << 30;
  long long max_entries = 200000;
  /// Extracted bytes per archive byte read, checked once 16 MiB are out: a decompression bomb is stopped
  /// after a few MiB of disk, not at the size cap. Real PTOAS releases expand 3-5 times.
  double max_ratio = 100;
};

struct ExtractResult {
  bool ok = false;
  std::string error;  // names the archive and the offending entry
  long long bytes = 0;
  long long entries = 0;
};

/// Extracts `archive` (format detected: tar with any filter, or zip) into the existing empty dir `root`.
ExtractResult extract_archive(const std::string& archive, const std::string& root, const ExtractLimits& limits);

}  // namespace pto
