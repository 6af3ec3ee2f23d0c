#include "cli/CkptTool.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <set>

#include "abi/ComponentFactory.hpp"
#include "abi/HostError.hpp"
#include "abi/SearchPath.hpp"
#include "checkpoint/CheckpointIndex.hpp"
#include "checkpoint/CheckpointMeta.hpp"
#include "checkpoint/CheckpointStore.hpp"
#include "checkpoint/ShardReader.hpp"
#include "cli/CkptHf.hpp"
#include "config/ConfigNode.hpp"
#include "config/YamlReader.hpp"
#include "formats/PosixFile.hpp"
#include "formats/SafetensorsHeader.hpp"
#include "rh/cpp/crc32.hpp"
#include "rh/cpp/error.hpp"

namespace fs = std::filesystem;

namespace rh::cli {
namespace {

constexpr int kExitDamaged = 1;
constexpr int kExitUsage = 2;

const char* kUsage =
    "usage: runner-host ckpt inspect DIR\n"
    "       runner-host ckpt consolidate DIR -o OUT.safetensors\n"
    "       runner-host ckpt convert DIR --to torch -o OUT.pt\n"
    "       runner-host ckpt convert DIR --to hf -o OUTDIR [--max-shard-size 5GB]\n"
    "                                        (a llama in Hugging Face's layout; files of at most\n"
    "                                        that size and model.safetensors.index.json)\n"
    "options: --plugin-path DIR (repeatable): where the checkpoint-IO plugin is found\n";

struct ToolArgs {
  std::string command;
  fs::path dir;
  fs::path out;
  std::string to;
  uint64_t max_shard_bytes = 0;  // --to hf: 0, one model.safetensors
  std::vector<std::string> plugin_paths;
};

// Throws std::invalid_argument with what is wrong.
ToolArgs parse(const std::vector<std::string>& args) {
  ToolArgs a;
  std::vector<std::string> positional;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) throw std::invalid_argument(arg + " needs a value");
      return args[++i];
    };
    if (arg == "-o" || arg == "--output")
      a.out = value();
    else if (arg == "--to")
      a.to = value();
    else if (arg == "--plugin-path")
      a.plugin_paths.push_back(value());
    else if (arg == "--max-shard-size")
      a.max_shard_bytes = parse_shard_size(value());
    else if (!arg.empty() && arg[0] == '-')
      throw std::invalid_argument("unknown option " + arg);
    else
      positional.push_back(arg);
  }
  if (positional.empty()) throw std::invalid_argument("no command");
  a.command = positional[0];
  if (a.command != "inspect" && a.command != "consolidate" && a.command != "convert")
    throw std::invalid_argument("unknown command '" + a.command + "'");
  if (positional.size() != 2)
    throw std::invalid_argument(a.command + " takes one checkpoint directory");
  a.dir = fs::absolute(positional[1]).lexically_normal();
  if (a.command != "inspect" && a.out.empty()) throw std::invalid_argument(a.command + " needs -o");
  if (a.command == "inspect" && !a.out.empty())
    throw std::invalid_argument("inspect writes nothing (no -o)");
  if (a.command == "convert" && a.to != "torch" && a.to != "hf")
    throw std::invalid_argument("convert needs --to torch or --to hf" +
                                (a.to.empty() ? std::string() : " (got '" + a.to + "')"));
  if (a.command != "convert" && !a.to.empty()) throw std::invalid_argument("--to is for convert");
  if (a.max_shard_bytes > 0 && a.to != "hf")
    throw std::invalid_argument("--max-shard-size is for convert --to hf");
  return a;
}

std::string mb(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MB", bytes / 1e6);
  return buf;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

int64_t bytes_of(const checkpoint::LogicalTensor& t) {
  return t.numel() * static_cast<int64_t>(checkpoint::dtype_size(t.dtype));
}

// The model tensors: "model.<name>" -> name, in the order an unsharded save
// writes them (largest element first, then by name).
std::vector<std::pair<std::string, const checkpoint::LogicalTensor*>> model_tensors(
    const checkpoint::TensorIndex& index) {
  std::vector<std::pair<std::string, const checkpoint::LogicalTensor*>> out;
  for (const auto& [name, t] : index)
    if (name.rfind("model.", 0) == 0) out.emplace_back(name.substr(6), &t);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    const size_t ea = checkpoint::dtype_size(a.second->dtype),
                 eb = checkpoint::dtype_size(b.second->dtype);
    return ea != eb ? ea > eb : a.first < b.first;
  });
  return out;
}

// "'a', 'b', 'c'": every name of `names`.
std::string quoted_list(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "'" : ", '") + n + "'";
  return out;
}

// Whether the optimizer state covers the parameters the run's optimizer held,
// from meta.json alone: `summary` for the listing, and an "incomplete: ..."
// finding per problem. The parameters that must be covered are meta.json's
// "optimizer_params" (every rank's optimizer, recorded at set-up), else, in
// a sharded checkpoint, those with fp32 masters (`master.<p>`), else only
// those with some state (then a parameter with none goes unnoticed, and the
// summary says so). What each must have: its optimizer's state fields
// (Adam, AdamW: step, exp_avg, exp_avg_sq, and max_exp_avg_sq with amsgrad;
// the job's optim_wrapper.optimizer, else the Adam fields the table holds);
// SGD's momentum_buffer is not required (there is none before a
// parameter's first gradient). In a sharded checkpoint each also needs its
// masters. Resume needs all of it.
struct OptimizerCoverage {
  std::string summary;
  std::vector<std::string> problems;
};

OptimizerCoverage optimizer_coverage(const checkpoint::CheckpointMeta& meta,
                                     const config::Node* job) {
  std::map<std::string, std::set<std::string>> fields;  // parameter -> its state fields
  std::set<std::string> masters;
  for (const auto& [name, t] : meta.tensors) {
    if (name.rfind("optim.", 0) == 0) {
      const size_t dot = name.rfind('.');
      if (dot > 6) fields[name.substr(6, dot - 6)].insert(name.substr(dot + 1));
    } else if (name.rfind("master.", 0) == 0) {
      masters.insert(name.substr(7));
    }
  }
  // The fields each parameter must have, and the optimizer's name.
  const config::Node* optimizer = nullptr;
  if (job != nullptr)
    if (const config::Node* wrapper = job->find("optim_wrapper"))
      optimizer = wrapper->find("optimizer");
  const config::Node* type = optimizer != nullptr ? optimizer->find("type") : nullptr;
  std::string kind = type != nullptr && type->is_scalar() ? type->as_string() : "";
  std::vector<std::string> required;
  if (kind == "Adam" || kind == "AdamW") {
    const config::Node* amsgrad = optimizer->find("amsgrad");
    required = {"step", "exp_avg", "exp_avg_sq"};
    if (amsgrad != nullptr && amsgrad->is_scalar() && amsgrad->as_bool()) {
      required.emplace_back("max_exp_avg_sq");
      kind += ", amsgrad";
    }
  } else if (kind != "SGD") {
    std::set<std::string> seen;
    for (const auto& [param, f] : fields) seen.insert(f.begin(), f.end());
    if (seen.count("exp_avg") || seen.count("exp_avg_sq")) {
      required = {"step", "exp_avg", "exp_avg_sq"};
      if (seen.count("max_exp_avg_sq")) required.emplace_back("max_exp_avg_sq");
    }
    kind = required.empty() ? "" : "Adam-type";
  }
  std::string field_list;
  for (const std::string& f : required) field_list += (field_list.empty() ? "" : ", ") + f;

  // The parameters it must cover.
  std::vector<std::string> covered;
  std::string whose;
  if (meta.optimizer_params) {
    covered = *meta.optimizer_params;
    whose = "the run's optimizer held (meta.json \"optimizer_params\")";
  } else if (!masters.empty()) {
    covered.assign(masters.begin(), masters.end());
    whose = "with fp32 master values (master.*)";
  } else {
    for (const auto& [param, f] : fields) covered.push_back(param);
    whose = "with optimizer state";
  }
  const std::string total = std::to_string(covered.size()) + " parameter(s) " + whose;

  OptimizerCoverage out;
  std::vector<std::string> without, partial, no_master;
  for (const std::string& p : covered) {
    const auto it = fields.find(p);
    std::vector<std::string> lacking;
    for (const std::string& f : required)
      if (it == fields.end() || it->second.count(f) == 0) lacking.push_back(f);
    std::string missing;
    for (const std::string& f : lacking) missing += (missing.empty() ? "" : ", ") + f;
    if (!lacking.empty() && lacking.size() == required.size())
      without.push_back(p);
    else if (!lacking.empty())
      partial.push_back("'" + p + "' (no " + missing + ")");
    if (!masters.empty() && masters.count(p) == 0) no_master.push_back(p);
  }
  if (!without.empty())
    out.problems.push_back("no optimizer state for " + std::to_string(without.size()) + " of the " +
                           total + ": " + quoted_list(without) + "; " + kind + " keeps " +
                           field_list + " for each, and resume cannot restore them");
  if (!partial.empty()) {
    std::string list;
    for (const std::string& p : partial) list += (list.empty() ? "" : ", ") + p;
    out.problems.push_back(std::to_string(partial.size()) + " of the " + total +
                           " lack part of their " + kind + " state (" + field_list + "): " + list);
  }
  if (!no_master.empty())
    out.problems.push_back("no fp32 master values for " + std::to_string(no_master.size()) +
                           " of the " + total +
                           ", in a checkpoint whose optimizer state is "
                           "sharded (master.<name>): " +
                           quoted_list(no_master));
  if (!out.problems.empty()) return out;
  if (kind == "SGD")
    out.summary =
        "optimizer state: SGD (momentum_buffer, which a parameter has only with "
        "momentum and after its first gradient: not required); " +
        std::to_string(fields.size()) + " of the " + total + " have one";
  else if (required.empty())
    out.summary = "optimizer state: no field every parameter must have; " +
                  std::to_string(fields.size()) + " of the " + total + " have some";
  else
    out.summary = "optimizer state: " + kind + " (" + field_list + ") for each of the " + total;
  if (!meta.optimizer_params && masters.empty())
    out.summary +=
        "; meta.json does not record which parameters the run's optimizer held (written before "
        "runner-host recorded \"optimizer_params\"), so a parameter without any state is not "
        "noticed";
  return out;
}

class Tool {
 public:
  Tool(const ToolArgs& args, host::PluginRegistry& registry, host::HostServices& services)
      : args_(args), registry_(registry), services_(services) {}

  int run() {
    meta_ = checkpoint::read_current_meta(args_.dir);
    open_io();
    if (args_.command == "inspect") return inspect();
    if (args_.command == "consolidate") return consolidate();
    return convert();
  }

 private:
  // The checkpoint-IO component the checkpoint was written with, configured
  // as its job configured it.
  void open_io() {
    if (meta_.config.empty())
      throw host::HostError(RH_ERROR_DATA_LOSS,
                            (args_.dir / "meta.json").string() + " has no \"config\"");
    job_ = config::parse_yaml(meta_.config, (args_.dir / "meta.json").string() + " (config)");
    const config::Node* spec = job_->find("checkpoint_io");
    if (spec == nullptr)
      throw host::HostError(RH_ERROR_DATA_LOSS, (args_.dir / "meta.json").string() +
                                                    ": its config has no checkpoint_io");
    factory_ = std::make_unique<host::ComponentFactory>(registry_, services_, args_.dir,
                                                        args_.dir.parent_path().string());
    io_ = factory_->create_checkpoint_io(*spec);
    store_ = std::make_unique<checkpoint::CheckpointStore>(args_.dir.parent_path(), *io_);
    reader_ = std::make_unique<checkpoint::ShardReader>(*store_, args_.dir, meta_.tensors);
  }

  int inspect() {
    std::cout << "checkpoint " << args_.dir.string() << ": format " << meta_.format_version
              << ", iteration " << meta_.iter << ", written by " << meta_.strategy << " on "
              << meta_.world_size << " rank(s) through " << io_->type() << "\n";
    std::cout << "files:";
    for (const std::string& f : meta_.files) std::cout << " " << f;
    std::cout << "\n";
    int64_t total = 0;
    size_t shards = 0;
    for (const auto& [name, t] : meta_.tensors) {
      total += bytes_of(t);
      shards += t.shards.size();
      std::cout << "  " << name << "  " << t.dtype << " " << shape_str(t.shape) << "  "
                << t.shards.size() << " shard(s):";
      for (const auto& s : t.shards)
        std::cout << " " << s.file << " [" << s.offset << ", " << s.offset + s.numel << ")";
      std::cout << "\n";
    }
    std::cout << meta_.tensors.size() << " tensor(s) in " << shards << " shard(s), "
              << mb(static_cast<double>(total)) << "\n";
    const OptimizerCoverage coverage = optimizer_coverage(meta_, job_.get());
    if (!coverage.summary.empty()) std::cout << coverage.summary << "\n";
    // Every file through its plugin (sizes, its own checksums), then every
    // shard against meta.json's CRC-32, one tensor at a time.
    std::vector<std::string> problems;
    const std::string why = store_->verify(args_.dir);
    if (!why.empty()) problems.push_back(why);
    for (const auto& [name, t] : meta_.tensors) {
      std::vector<checkpoint::ShardReader::Request> requests;
      for (size_t i = 0; i < t.shards.size(); ++i)
        requests.push_back(
            {name, t.shards[i].offset, t.shards[i].numel, std::nullopt, std::to_string(i)});
      rh_StateDict got;
      try {
        reader_->read(requests, got);
      } catch (const std::exception& e) {
        problems.push_back(e.what());
        continue;
      }
      for (size_t i = 0; i < t.shards.size(); ++i) {
        const rh_StateDict::Entry& piece = got.entries.at(std::to_string(i));
        const uint32_t crc = rh::crc32_update(0, piece.data(), piece.size());
        if (crc != t.shards[i].crc32) {
          char buf[64];
          std::snprintf(buf, sizeof buf, "crc32 %08x, meta.json says %08x", crc, t.shards[i].crc32);
          problems.push_back((args_.dir / t.shards[i].file).string() + ": stored tensor '" +
                             t.shards[i].key + "' (a shard of '" + name +
                             "') is corrupted: " + buf);
        }
      }
    }
    if (problems.empty() && coverage.problems.empty()) {
      std::cout << "ok: every file verifies and every shard matches its checksum\n";
      return 0;
    }
    for (const std::string& p : problems) std::cout << "damaged: " << p << "\n";
    // What was never written: the files verify, the checkpoint is incomplete.
    for (const std::string& p : coverage.problems) std::cout << "incomplete: " << p << "\n";
    if (problems.empty())
      std::cout << "every file verifies and every shard matches its checksum, but the checkpoint "
                   "is incomplete: what is missing was never written, and resume cannot restore "
                   "it\n";
    return kExitDamaged;
  }

  // Writes the safetensors file `out` (through OUT.tmp, renamed once
  // complete and synced), one tensor at a time: the header (its length
  // fixed: every checksum is 8 hex digits) first with placeholder
  // checksums, the data (`data(i, sink)` hands tensor i's bytes to `sink`),
  // then the header again with the checksums of what was written. Returns
  // the bytes of data.
  using Sink = std::function<void(const uint8_t*, size_t)>;
  static uint64_t write_safetensors(const fs::path& out, safetensors::Header header,
                                    const std::function<void(size_t, const Sink&)>& data) {
    uint64_t offset = 0;
    for (safetensors::TensorEntry& e : header.tensors) {
      const uint64_t bytes = e.end - e.begin;
      e.begin = offset;
      e.end = offset + bytes;
      e.crc32 = 0;
      offset = e.end;
    }
    const std::string tmp = out.string() + ".tmp";
    try {
      posix::PosixFile file = posix::PosixFile::create(tmp);
      const std::string placeholder = safetensors::encode_header(header);
      const std::string start = safetensors::file_start(placeholder);
      file.write_all(start.data(), start.size());
      for (size_t i = 0; i < header.tensors.size(); ++i)
        data(i, [&](const uint8_t* bytes, size_t size) {
          if (size != header.tensors[i].size())
            throw host::HostError(RH_ERROR_INTERNAL, "tensor '" + header.tensors[i].name +
                                                         "' read back at another size");
          file.write_all(bytes, size);
          header.tensors[i].crc32 = rh::crc32_update(0, bytes, size);
        });
      const std::string final_header = safetensors::encode_header(header);
      if (final_header.size() != placeholder.size())
        throw host::HostError(RH_ERROR_INTERNAL, "the header changed size");
      file.write_at(8, final_header.data(), final_header.size());
      file.sync();
      file.close();
      posix::rename_file(tmp, out.string());
      posix::sync_directory(out.parent_path().string());
    } catch (const rh::Exception& e) {
      fs::remove(tmp);
      throw host::HostError(e.code(), e.what());
    } catch (...) {
      fs::remove(tmp);
      throw;
    }
    return offset;
  }

  // A safetensors entry for `t` (its data offsets span its size).
  static safetensors::TensorEntry entry_of(const std::string& name,
                                           const checkpoint::LogicalTensor& t) {
    safetensors::TensorEntry e;
    e.name = name;
    e.dtype = safetensors::dtype_by_name(t.dtype);
    if (e.dtype == nullptr)
      throw host::HostError(RH_ERROR_UNIMPLEMENTED, "tensor '" + name + "' has dtype " + t.dtype +
                                                        ", which safetensors lacks");
    for (int64_t d : t.shape) e.shape.push_back(static_cast<uint64_t>(d));
    e.begin = 0;
    e.end = static_cast<uint64_t>(bytes_of(t));
    return e;
  }

  // Model tensor `name`, whole.
  rh_StateDict read_whole(const std::string& name) {
    rh_StateDict one;
    reader_->read({reader_->whole("model." + name, "t")}, one);
    return one;
  }

  int consolidate() {
    const auto tensors = model_tensors(meta_.tensors);
    if (tensors.empty())
      throw host::HostError(RH_ERROR_NOT_FOUND,
                            "checkpoint " + args_.dir.string() + " has no model tensors");
    safetensors::Header header;
    header.metadata = {{"format", "pt"}};
    for (const auto& [name, t] : tensors) header.tensors.push_back(entry_of(name, *t));
    const fs::path out = fs::absolute(args_.out);
    const uint64_t bytes = write_safetensors(out, header, [&](size_t i, const Sink& sink) {
      const rh_StateDict one = read_whole(tensors[i].first);
      const rh_StateDict::Entry& t = one.entries.at("t");
      sink(t.data(), t.size());
    });
    std::cout << "wrote " << out.string() << ": " << tensors.size() << " tensor(s), "
              << mb(static_cast<double>(bytes)) << ", from " << args_.dir.string() << "\n";
    return 0;
  }

  // --to hf (CkptHf.hpp): OUTDIR/model.safetensors and OUTDIR/config.json.
  int convert_hf() {
    const config::Node* model = job_->find("model");
    if (model == nullptr)
      throw host::HostError(RH_ERROR_DATA_LOSS,
                            (args_.dir / "meta.json").string() + ": its config has no model");
    const auto tensors = model_tensors(meta_.tensors);
    std::vector<std::string> names;
    for (const auto& [name, t] : tensors) names.push_back(name);
    std::vector<HfTensor> plan;
    try {
      plan = hf_llama_plan(*model, names);
    } catch (const std::invalid_argument& e) {
      throw host::HostError(RH_ERROR_INVALID_ARGUMENT, e.what());
    }
    safetensors::Header header;
    header.metadata = {{"format", "pt"}};
    int64_t ffn_dim = 0;
    std::string dtype = "float32";
    for (size_t i = 0; i < tensors.size(); ++i) {
      header.tensors.push_back(entry_of(plan[i].hf_name, *tensors[i].second));
      if (plan[i].name == "layers.0.feed_forward.w1.weight") ffn_dim = tensors[i].second->shape[0];
      if (plan[i].name == "tok_embeddings.weight")
        dtype = tensors[i].second->dtype == "BF16"  ? "bfloat16"
                : tensors[i].second->dtype == "F16" ? "float16"
                                                    : "float32";
    }
    const fs::path out = fs::absolute(args_.out);
    fs::create_directories(out);
    auto write_tensor = [&](size_t i, const Sink& sink) {
      const rh_StateDict one = read_whole(tensors[i].first);
      const rh_StateDict::Entry& t = one.entries.at("t");
      if (plan[i].rotary_heads == 0) return sink(t.data(), t.size());
      const std::vector<int64_t>& shape = tensors[i].second->shape;
      const std::vector<uint8_t> hf =
          permute_rotary_rows(t.data(), shape[0], shape[1], plan[i].rotary_heads,
                              checkpoint::dtype_size(tensors[i].second->dtype));
      sink(hf.data(), hf.size());
    };
    // One file, or files of at most --max-shard-size and their index.
    std::vector<uint64_t> sizes;
    for (const auto& e : header.tensors) sizes.push_back(e.size());
    const auto shards = hf_shards(sizes, args_.max_shard_bytes);
    uint64_t bytes = 0;
    std::vector<std::pair<std::string, std::string>> weight_map;
    for (size_t s = 0; s < shards.size(); ++s) {
      char file[64] = "model.safetensors";
      if (shards.size() > 1)
        std::snprintf(file, sizeof file, "model-%05zu-of-%05zu.safetensors", s + 1, shards.size());
      safetensors::Header part;
      part.metadata = header.metadata;
      for (size_t i : shards[s]) {
        part.tensors.push_back(header.tensors[i]);
        weight_map.emplace_back(header.tensors[i].name, file);
      }
      bytes += write_safetensors(
          out / file, part, [&](size_t k, const Sink& sink) { write_tensor(shards[s][k], sink); });
    }
    if (shards.size() > 1) {
      const std::string tmp = (out / "model.safetensors.index.json.tmp").string();
      std::ofstream(tmp) << hf_index_json(bytes, weight_map);
      posix::rename_file(tmp, (out / "model.safetensors.index.json").string());
    }
    const std::string json = hf_llama_config_json(*model, ffn_dim, dtype);
    const std::string tmp = (out / "config.json.tmp").string();
    std::ofstream(tmp) << json;
    posix::rename_file(tmp, (out / "config.json").string());
    std::cout << "wrote " << out.string() << ": "
              << (shards.size() > 1 ? std::to_string(shards.size()) +
                                          " safetensors files with model.safetensors.index.json"
                                    : std::string("model.safetensors"))
              << " (" << tensors.size() << " tensor(s) under Hugging Face's names, "
              << mb(static_cast<double>(bytes)) << ") and config.json (LlamaForCausalLM)\n";
    return 0;
  }

  int convert() {
    if (args_.to == "hf") return convert_hf();
    std::map<std::string, rh_StateDict::Entry> tensors;
    for (const auto& [name, t] : model_tensors(meta_.tensors)) {
      rh_StateDict one;
      reader_->read({reader_->whole("model." + name, "t")}, one);
      tensors[name] = std::move(one.entries.at("t"));
    }
    const fs::path out = fs::absolute(args_.out);
    write_torch_file(tensors, out);
    std::cout << "wrote " << out.string() << ": " << tensors.size()
              << " tensor(s) as a dict (torch.load)\n";
    return 0;
  }

  const ToolArgs& args_;
  host::PluginRegistry& registry_;
  host::HostServices& services_;
  checkpoint::CheckpointMeta meta_;
  config::NodePtr job_;
  std::unique_ptr<host::ComponentFactory> factory_;
  std::unique_ptr<host::CheckpointIoInstance> io_;
  std::unique_ptr<checkpoint::CheckpointStore> store_;
  std::unique_ptr<checkpoint::ShardReader> reader_;
};

}  // namespace

int run_ckpt_tool(const std::vector<std::string>& args, const fs::path& executable,
                  host::PluginRegistry& registry, host::HostServices& services) {
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::cout << kUsage;
    return 0;
  }
  ToolArgs a;
  try {
    a = parse(args);
  } catch (const std::invalid_argument& e) {
    std::cerr << "runner-host ckpt: error: " << e.what() << "\n" << kUsage;
    return kExitUsage;
  }
  try {
    registry.set_search_path(
        host::plugin_search_dirs(a.plugin_paths, std::getenv("RH_PLUGIN_PATH"), executable, a.dir));
    std::error_code ec;
    if (!fs::is_directory(a.dir, ec))
      throw host::HostError(RH_ERROR_NOT_FOUND, a.dir.string() + ": no such checkpoint directory");
    return Tool(a, registry, services).run();
  } catch (const std::exception& e) {
    std::cerr << "runner-host ckpt " << a.command << ": error: " << e.what() << "\n";
    return kExitDamaged;
  }
}

}  // namespace rh::cli
