// The decode limit of an image loader: libjpeg-turbo decoding a folder's
// JPEGs on N threads and nothing else, the images/s no loader using that
// decoder on N cores can pass (issue 40, item 6; tools/bench/bench_data.sh
// sets it beside runner-host's loader and torchvision's DataLoader).
//
//   build/bin/rh_bench_decode --dir DIR [--threads 2] [--rounds 3]
//
// Every *.JPEG / *.jpg / *.jpeg under DIR (recursively) is decoded once a
// round: each thread claims the next file, reads it (open + read into a
// buffer of its own, every time: a loader reads its files every epoch, and
// the page cache serves them here as it does there) and decodes it whole
// with tjDecompress2 to 8-bit BGR (what mmcv's LoadImageFromFile gives: no
// scaling, no DCT shortcut, libjpeg-turbo's default accurate IDCT). No
// resize, crop, tensor or batch: what a loader does beyond decoding is what
// separates it from this figure. Before the first round every file is read
// once, untimed, so that all rounds find them in the page cache.
// Printed: each round's images/s and the median over rounds (the figure:
// one round slowed by another job on a shared machine does not move it).
// No LibTorch.
#include <fcntl.h>
#include <turbojpeg.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

bool is_jpeg(const fs::path& p) {
  const std::string ext = p.extension().string();
  return ext == ".JPEG" || ext == ".jpeg" || ext == ".jpg" || ext == ".JPG";
}

// Reads `path` whole into `buf` (resized to fit). Throws naming the file.
void read_file(const std::string& path, std::vector<unsigned char>& buf) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
  const off_t size = ::lseek(fd, 0, SEEK_END);
  buf.resize(size > 0 ? static_cast<size_t>(size) : 0);
  size_t done = 0;
  while (done < buf.size()) {
    const ssize_t n = ::pread(fd, buf.data() + done, buf.size() - done, static_cast<off_t>(done));
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      ::close(fd);
      throw std::runtime_error("cannot read " + path + ": " + std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
}

// One thread's decoder and buffers, reused from file to file.
class Decoder {
 public:
  Decoder() : handle_(tjInitDecompress()) {
    if (handle_ == nullptr)
      throw std::runtime_error(std::string("tjInitDecompress: ") + tjGetErrorStr2(nullptr));
  }
  ~Decoder() { tjDestroy(handle_); }
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  // Reads and decodes `path`; returns its pixels (width x height).
  size_t decode(const std::string& path) {
    read_file(path, file_);
    int width = 0, height = 0, subsampling = 0, colorspace = 0;
    if (tjDecompressHeader3(handle_, file_.data(), file_.size(), &width, &height, &subsampling,
                            &colorspace) != 0)
      throw std::runtime_error(path +
                               ": not a JPEG libjpeg-turbo reads: " + tjGetErrorStr2(handle_));
    pixels_.resize(static_cast<size_t>(width) * height * 3);
    // A warning (TJERR_WARNING: e.g. extraneous bytes) still decodes the
    // image, as every loader takes it; an error does not.
    if (tjDecompress2(handle_, file_.data(), file_.size(), pixels_.data(), width, 0, height,
                      TJPF_BGR, 0) != 0 &&
        tjGetErrorCode(handle_) != TJERR_WARNING)
      throw std::runtime_error(path + ": cannot decode: " + tjGetErrorStr2(handle_));
    return static_cast<size_t>(width) * height;
  }

 private:
  tjhandle handle_;
  std::vector<unsigned char> file_;
  std::vector<unsigned char> pixels_;
};

struct RoundResult {
  double seconds = 0;
  size_t pixels = 0;
};

// Decodes every file once on `threads` threads, each claiming the next file.
RoundResult decode_all(const std::vector<std::string>& files, int threads) {
  std::atomic<size_t> next{0};
  std::atomic<size_t> pixels{0};
  std::mutex error_mutex;
  std::string error;
  auto work = [&] {
    try {
      Decoder decoder;
      size_t mine = 0;
      for (size_t i = next++; i < files.size(); i = next++) mine += decoder.decode(files[i]);
      pixels += mine;
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (error.empty()) error = e.what();
      next = files.size();  // the others stop at their next file
    }
  };
  const auto start = Clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(work);
  for (std::thread& t : pool) t.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (!error.empty()) throw std::runtime_error(error);
  return {seconds, pixels.load()};
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  int threads = 2;
  int rounds = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--dir" && has_value) {
      dir = argv[++i];
    } else if (a == "--threads" && has_value) {
      threads = std::atoi(argv[++i]);
    } else if (a == "--rounds" && has_value) {
      rounds = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: %s --dir DIR [--threads N] [--rounds N]\n"
                   "unknown or incomplete argument '%s'\n",
                   argv[0], a.c_str());
      return 2;
    }
  }
  if (dir.empty() || threads < 1 || rounds < 1) {
    std::fprintf(stderr, "%s: --dir DIR is required; --threads and --rounds must be >= 1\n",
                 argv[0]);
    return 2;
  }
  try {
    std::vector<std::string> files;
    size_t bytes = 0;
    for (const auto& entry : fs::recursive_directory_iterator(dir)) {
      if (!entry.is_regular_file() || !is_jpeg(entry.path())) continue;
      files.push_back(entry.path().string());
      bytes += entry.file_size();
    }
    if (files.empty()) {
      std::fprintf(stderr, "%s: no *.JPEG, *.jpeg or *.jpg file under %s\n", argv[0], dir.c_str());
      return 1;
    }
    std::sort(files.begin(), files.end());
    std::vector<unsigned char> buf;
    for (const std::string& f : files) read_file(f, buf);  // into the page cache, untimed

    std::printf("decode limit: %zu JPEGs (%.1f MiB) under %s, %d thread%s, libjpeg-turbo to BGR\n",
                files.size(), static_cast<double>(bytes) / (1 << 20), dir.c_str(), threads,
                threads == 1 ? "" : "s");
    std::vector<double> rates;
    for (int r = 0; r < rounds; ++r) {
      const RoundResult result = decode_all(files, threads);
      rates.push_back(static_cast<double>(files.size()) / result.seconds);
      std::printf("round %d: %.1f images/s (%.1f Mpixels/s, %.3f s)\n", r + 1, rates.back(),
                  static_cast<double>(result.pixels) / result.seconds / 1e6, result.seconds);
    }
    std::vector<double> sorted = rates;
    std::sort(sorted.begin(), sorted.end());
    const size_t n = sorted.size();
    const double median = n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    std::printf("decode limit: %.1f images/s (median of %d round%s)\n", median, rounds,
                rounds == 1 ? "" : "s");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
    return 1;
  }
}
