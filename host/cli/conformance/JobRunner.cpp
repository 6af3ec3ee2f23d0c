#include "cli/conformance/JobRunner.hpp"

#include <fstream>
#include <iomanip>
#include <sstream>
#include <stdexcept>

namespace fs = std::filesystem;

namespace rh::cli::conformance {

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string JobResult::summary() const {
  std::ostringstream s;
  s << std::fixed << std::setprecision(1);
  if (exit_code < 0)
    s << "timed out after " << seconds << " s";
  else
    s << "exit " << exit_code << " after " << seconds << " s";
  s << " (log: " << log_file.string() << ")";
  return s.str();
}

std::string JobResult::tail(int lines) const {
  std::vector<std::string> all;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) all.push_back(line);
  std::string out;
  const size_t from = all.size() > static_cast<size_t>(lines) ? all.size() - lines : 0;
  for (size_t i = from; i < all.size(); ++i) out += "\n    | " + all[i];
  return out;
}

JobRunner::JobRunner(fs::path program, fs::path root, std::chrono::seconds timeout)
    : program_(std::move(program)), root_(std::move(root)), timeout_(timeout) {}

fs::path JobRunner::log_file(const std::string& name) const { return root_ / (name + ".log"); }

std::vector<std::string> JobRunner::arguments(const std::string& name, const std::string& yaml,
                                              int ranks,
                                              const std::vector<std::string>& extra_args) {
  const fs::path job_file = root_ / (name + ".yaml");
  std::ofstream out(job_file);
  out << "work_dir: " << work_dir(name).string() << "\n" << yaml;
  out.close();
  if (!out) throw std::runtime_error("cannot write " + job_file.string());
  std::vector<std::string> args = {"--config", job_file.string()};
  // The launcher picks a free port on one node: jobs never collide.
  if (ranks > 0) args.insert(args.end(), {"--nproc-per-node", std::to_string(ranks)});
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  return args;
}

const JobResult& JobRunner::run(const std::string& name, const std::string& yaml, int ranks,
                                const std::vector<std::string>& extra_args) {
  std::ostringstream key;
  key << ranks << "\n" << yaml;
  for (const auto& a : extra_args) key << "\n" << a;
  if (auto it = done_.find(name); it != done_.end()) {
    if (it->second.first != key.str())
      throw std::logic_error("conformance job '" + name + "' asked for with another job");
    return it->second.second;
  }
  JobResult r;
  r.work_dir = work_dir(name);
  r.log_file = log_file(name);
  const auto start = std::chrono::steady_clock::now();
  {
    ChildProcess child(program_, arguments(name, yaml, ranks, extra_args), r.log_file);
    const std::optional<int> code = child.wait(timeout_);
    r.exit_code = code ? *code : -1;
  }  // a job that timed out is killed here, with all it started
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.log = read_text(r.log_file);
  return done_.emplace(name, std::make_pair(key.str(), std::move(r))).first->second.second;
}

std::unique_ptr<ChildProcess> JobRunner::start(const std::string& name, const std::string& yaml,
                                               int ranks,
                                               const std::vector<std::string>& extra_args) {
  return std::make_unique<ChildProcess>(program_, arguments(name, yaml, ranks, extra_args),
                                        log_file(name));
}

}  // namespace rh::cli::conformance
