#include "torch_services/BlasProbeCache.hpp"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace rh::host {
namespace {

namespace fs = std::filesystem;

// Bump when the probe or its line change: older files then never match.
constexpr const char* kFormat = "runner-host blas-probe cache 1";
constexpr const char* kSeparator = "--";

// FNV-1a, 64 bits: a stable file name for a key (std::hash may differ
// between builds; the key in the file settles any collision).
std::string file_name(const std::string& key) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : key) h = (h ^ c) * 1099511628211ull;
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(h));
  return std::string(text) + ".txt";
}

std::optional<BlasProbeResult> read_entry(const fs::path& file, const std::string& key) {
  std::ifstream in(file);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  const std::string content = text.str();
  const std::string head = key + "\n" + kSeparator + "\n";
  if (content.rfind(head, 0) != 0) return std::nullopt;
  BlasProbeResult r = parse_probe_output(content.substr(head.size()));
  if (!r.error.empty() || !r.timed) return std::nullopt;
  return r;
}

// Written to a file of its own and renamed into place: a process reading
// the entry never sees half of one, and two writing at once leave one whole.
void write_entry(const fs::path& dir, const fs::path& file, const std::string& key,
                 const BlasProbeResult& r) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return;
  const fs::path partial = file.string() + "." + std::to_string(::getpid()) + ".partial";
  {
    std::ofstream out(partial);
    out << key << "\n" << kSeparator << "\n" << probe_line(r) << "\n";
    if (!out) {
      out.close();
      fs::remove(partial, ec);
      return;
    }
  }
  fs::rename(partial, file, ec);
  if (ec) fs::remove(partial, ec);
}

}  // namespace

std::optional<fs::path> default_probe_cache_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg == '/')
    return fs::path(xdg) / "runner-host" / "blas-probe";
  if (const char* home = std::getenv("HOME"); home != nullptr && *home == '/')
    return fs::path(home) / ".cache" / "runner-host" / "blas-probe";
  return std::nullopt;
}

std::string probe_cache_key(const ProbeRequest& request, const std::string& cpu_model,
                            const std::vector<std::string>& openblas_vars) {
  std::error_code ec;
  const fs::path library = fs::canonical(request.library, ec);
  if (ec || request.library.empty() || request.library.front() != '/') return "";
  const auto size = fs::file_size(library, ec);
  if (ec) return "";
  const auto mtime = fs::last_write_time(library, ec);
  if (ec) return "";
  const ProbeShape shape;
  std::ostringstream key;
  key << kFormat << "\nlibrary=" << library.string() << "\nsize=" << size
      << "\nmtime=" << mtime.time_since_epoch().count() << "\ncpu=" << cpu_model
      << "\nshape=" << shape.m << "x" << shape.n << "x" << shape.k << "x" << shape.repetitions
      << "\ncoretype=" << request.coretype.value_or("-");
  // The child's OPENBLAS_* variables: this process's, less those it sets.
  for (const std::string& var : openblas_vars) {
    if (var.rfind("OPENBLAS_NUM_THREADS=", 0) == 0) continue;
    if (request.coretype && var.rfind("OPENBLAS_CORETYPE=", 0) == 0) continue;
    key << "\nenv " << var;
  }
  return key.str();
}

ProbeFn cached_prober(ProbeFn inner, fs::path dir, std::string cpu_model,
                      std::vector<std::string> openblas_vars) {
  return [inner = std::move(inner), dir = std::move(dir), cpu_model = std::move(cpu_model),
          openblas_vars = std::move(openblas_vars)](const ProbeRequest& request) {
    if (request.core_only) return inner(request);
    const std::string key = probe_cache_key(request, cpu_model, openblas_vars);
    if (key.empty()) return inner(request);
    const fs::path file = dir / file_name(key);
    if (auto kept = read_entry(file, key)) return *kept;
    BlasProbeResult r = inner(request);
    if (r.error.empty() && r.timed) write_entry(dir, file, key, r);
    return r;
  };
}

}  // namespace rh::host
