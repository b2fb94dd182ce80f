#include "remat/io/chain_file.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "remat/model/block.hpp"

namespace remat {
namespace {

using nlohmann::json;

// Reads typed fields of one JSON object and remembers which ones were used, so that unknown fields
// can be reported. Every error names `where` and the field.
class FieldReader {
 public:
  FieldReader(const json& object, std::string where) : object_(object), where_(std::move(where)) {}

  bool has(const char* field) const { return object_.contains(field); }

  Status error(const std::string& field, const std::string& message) const {
    return Status::invalid(where_ + ": field '" + field + "' " + message);
  }

  Status readString(const char* field, std::string& out, bool required) {
    used_.insert(field);
    if (!object_.contains(field)) return required ? error(field, "is missing") : Status::ok();
    const json& v = object_.at(field);
    if (!v.is_string()) return error(field, "must be a string, not " + std::string(v.type_name()));
    out = v.get<std::string>();
    return Status::ok();
  }

  Status readBool(const char* field, bool& out) {
    used_.insert(field);
    if (!object_.contains(field)) return Status::ok();
    const json& v = object_.at(field);
    if (!v.is_boolean()) return error(field, "must be true or false, not " + describe(v));
    out = v.get<bool>();
    return Status::ok();
  }

  // Non-negative integers that fit in 64 bits (sizes in bytes).
  Status readBytes(const char* field, std::uint64_t& out, bool required, bool* present = nullptr) {
    used_.insert(field);
    if (present) *present = object_.contains(field);
    if (!object_.contains(field)) return required ? error(field, "is missing") : Status::ok();
    const json& v = object_.at(field);
    if (v.is_number_unsigned()) {
      out = v.get<std::uint64_t>();
      return Status::ok();
    }
    if (v.is_number_integer()) return error(field, "must be a non-negative integer, not " + v.dump());
    if (v.is_number_float()) {
      const double d = v.get<double>();
      if (d >= 18446744073709551616.0) return error(field, "is " + v.dump() + ", which overflows 64 bits");
      if (d < 0) return error(field, "must be a non-negative integer, not " + v.dump());
      return error(field, "must be an integer, not " + v.dump());
    }
    return error(field, "must be a non-negative integer, not " + describe(v));
  }

  // Positive (or, with minimum 0, non-negative) integers that fit in int64 (dimensions).
  Status readInt(const char* field, std::int64_t& out, bool required, std::int64_t minimum) {
    used_.insert(field);
    if (!object_.contains(field)) return required ? error(field, "is missing") : Status::ok();
    const json& v = object_.at(field);
    if (v.is_number_integer() || v.is_number_unsigned()) {
      if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
        return error(field, "is " + v.dump() + ", which overflows 64 bits");
      const std::int64_t value = v.get<std::int64_t>();
      if (value < minimum) return error(field, "must be at least " + std::to_string(minimum) + ", not " + v.dump());
      out = value;
      return Status::ok();
    }
    if (v.is_number_float()) {
      if (std::fabs(v.get<double>()) >= 9223372036854775808.0)
        return error(field, "is " + v.dump() + ", which overflows 64 bits");
      return error(field, "must be an integer, not " + v.dump());
    }
    return error(field, "must be an integer, not " + describe(v));
  }

  Status readDouble(const char* field, double& out, double minimum, double maximum) {
    used_.insert(field);
    if (!object_.contains(field)) return Status::ok();
    const json& v = object_.at(field);
    if (!v.is_number()) return error(field, "must be a number, not " + describe(v));
    const double d = v.get<double>();
    if (!std::isfinite(d) || d < minimum || d > maximum)
      return error(field,
                   "must be between " + json(minimum).dump() + " and " + json(maximum).dump() + ", not " + v.dump());
    out = d;
    return Status::ok();
  }

  void markUsed(const char* field) { used_.insert(field); }
  const std::string& where() const { return where_; }

  Status rejectUnknown(const std::string& context) const {
    for (const auto& [key, value] : object_.items()) {
      if (!used_.count(key)) {
        std::string known;
        for (const auto& k : used_) known += (known.empty() ? "" : ", ") + k;
        return Status::invalid(where_ + ": field '" + key + "' is not a field of " + context + " (fields: " + known +
                               ")");
      }
    }
    return Status::ok();
  }

  static std::string describe(const json& v) {
    std::string text = v.dump();
    if (text.size() > 40) text = text.substr(0, 37) + "...";
    return std::string(v.type_name()) + " " + text;
  }

 private:
  const json& object_;
  std::string where_;
  std::set<std::string> used_;
};

// Optional measured numbers on real kinds, written by `remat profile`.
Status readMeasured(FieldReader& r, LayerSpec& layer) {
  bool hasFwd = false, hasBwd = false, hasFwdCost = r.has("fwd_cost"), hasBwdCost = r.has("bwd_cost");
  REMAT_RETURN_IF_ERROR(r.readBytes("fwd_workspace_bytes", layer.numbers.fwdWorkspaceBytes, false, &hasFwd));
  REMAT_RETURN_IF_ERROR(r.readBytes("bwd_workspace_bytes", layer.numbers.bwdWorkspaceBytes, false, &hasBwd));
  if (hasFwd != hasBwd)
    return r.error(hasFwd ? "bwd_workspace_bytes" : "fwd_workspace_bytes",
                   "is missing: measured workspaces come in pairs (fwd_workspace_bytes and bwd_workspace_bytes)");
  layer.hasMeasuredWorkspace = hasFwd;
  REMAT_RETURN_IF_ERROR(r.readDouble("fwd_cost", layer.numbers.fwdCost, 0.0, 1e300));
  REMAT_RETURN_IF_ERROR(r.readDouble("bwd_cost", layer.numbers.bwdCost, 0.0, 1e300));
  if (hasFwdCost != hasBwdCost)
    return r.error(hasFwdCost ? "bwd_cost" : "fwd_cost",
                   "is missing: measured costs come in pairs (fwd_cost and bwd_cost)");
  layer.hasMeasuredCost = hasFwdCost;
  return Status::ok();
}

// The fields of each kind, in the order their errors are reported.
Status readAbstractFields(FieldReader& r, LayerNumbers& m) {
  REMAT_RETURN_IF_ERROR(r.readBytes("out_bytes", m.outBytes, true));
  REMAT_RETURN_IF_ERROR(r.readBool("needs_input", m.needsInput));
  REMAT_RETURN_IF_ERROR(r.readBool("needs_output", m.needsOutput));
  REMAT_RETURN_IF_ERROR(r.readBytes("extra_bytes", m.extraBytes, false));
  REMAT_RETURN_IF_ERROR(r.readBytes("fwd_workspace_bytes", m.fwdWorkspaceBytes, false));
  REMAT_RETURN_IF_ERROR(r.readBytes("bwd_workspace_bytes", m.bwdWorkspaceBytes, false));
  REMAT_RETURN_IF_ERROR(r.readBytes("param_bytes", m.paramBytes, false));
  REMAT_RETURN_IF_ERROR(r.readDouble("fwd_cost", m.fwdCost, 0.0, 1e300));
  return r.readDouble("bwd_cost", m.bwdCost, 0.0, 1e300);
}

Status readConv2dFields(FieldReader& r, LayerSpec& layer) {
  REMAT_RETURN_IF_ERROR(r.readInt("out_channels", layer.outChannels, true, 1));
  REMAT_RETURN_IF_ERROR(r.readInt("kernel", layer.kernel, true, 1));
  REMAT_RETURN_IF_ERROR(r.readInt("stride", layer.stride, false, 1));
  REMAT_RETURN_IF_ERROR(r.readInt("padding", layer.padding, false, 0));
  REMAT_RETURN_IF_ERROR(r.readInt("groups", layer.groups, false, 1));
  return r.readBool("bias", layer.bias);
}

Status readPoolFields(FieldReader& r, LayerSpec& layer) {
  REMAT_RETURN_IF_ERROR(r.readInt("kernel", layer.kernel, true, 1));
  layer.stride = layer.kernel;  // PyTorch's default stride is the kernel size
  REMAT_RETURN_IF_ERROR(r.readInt("stride", layer.stride, false, 1));
  REMAT_RETURN_IF_ERROR(r.readInt("padding", layer.padding, false, 0));
  return r.readBool("ceil_mode", layer.ceilMode);
}

Status readAdaptiveAvgPoolFields(FieldReader& r, LayerSpec& layer) {
  REMAT_RETURN_IF_ERROR(r.readInt("output_height", layer.outputHeight, false, 1));
  return r.readInt("output_width", layer.outputWidth, false, 1);
}

Status readLinearFields(FieldReader& r, LayerSpec& layer) {
  REMAT_RETURN_IF_ERROR(r.readInt("out_features", layer.outFeatures, true, 1));
  return r.readBool("bias", layer.bias);
}

Status readDropoutFields(FieldReader& r, LayerSpec& layer) {
  REMAT_RETURN_IF_ERROR(r.readDouble("p", layer.dropoutP, 0.0, 1.0));
  if (layer.dropoutP >= 1.0) return r.error("p", "must be below 1 (p = 1 drops everything)");
  return Status::ok();
}

Status readBasicBlockFields(FieldReader& r, LayerSpec& layer) {
  REMAT_RETURN_IF_ERROR(r.readInt("out_channels", layer.outChannels, true, 1));
  return r.readInt("stride", layer.stride, false, 1);
}

Status readBottleneckFields(FieldReader& r, LayerSpec& layer) {
  REMAT_RETURN_IF_ERROR(r.readInt("width", layer.width, true, 1));
  REMAT_RETURN_IF_ERROR(r.readInt("out_channels", layer.outChannels, true, 1));
  return r.readInt("stride", layer.stride, false, 1);
}

Status readInvertedResidualFields(FieldReader& r, LayerSpec& layer) {
  REMAT_RETURN_IF_ERROR(r.readInt("out_channels", layer.outChannels, true, 1));
  REMAT_RETURN_IF_ERROR(r.readInt("stride", layer.stride, false, 1));
  return r.readInt("expand_ratio", layer.expandRatio, false, 1);
}

// One inner op of a block: name, kind, inputs (default: the tensor written just before it), and a
// conv2d's fields.
Status readBlockOp(const json& object, std::size_t index, const std::string& where, BlockOpSpec& op) {
  std::string opWhere = where + ", inner op " + std::to_string(index);
  if (!object.is_object())
    return Status::invalid(opWhere + ": must be an object, not " + FieldReader::describe(object));
  if (object.contains("name") && object.at("name").is_string())
    opWhere += " ('" + object.at("name").get<std::string>() + "')";
  FieldReader r(object, opWhere);
  op.layer.name = "op" + std::to_string(index);
  REMAT_RETURN_IF_ERROR(r.readString("name", op.layer.name, false));
  std::string kind;
  REMAT_RETURN_IF_ERROR(r.readString("kind", kind, true));
  auto parsed = parseBlockOpKind(kind);
  if (!parsed) return r.error("kind", "is '" + kind + "': " + parsed.status().message());
  op.kind = *parsed;
  r.markUsed("inputs");
  op.inputs = {index};
  if (object.contains("inputs")) {
    const json& inputs = object.at("inputs");
    if (!inputs.is_array() || inputs.empty())
      return r.error("inputs", "must be a non-empty array of tensor numbers, not " + FieldReader::describe(inputs));
    op.inputs.clear();
    for (const json& t : inputs) {
      if (!t.is_number_integer() || t.get<std::int64_t>() < 0 || t.get<std::uint64_t>() > index)
        return r.error("inputs", "lists " + t.dump() + ": op " + std::to_string(index) +
                                     " may read tensor 0 (the block's input) up to " + std::to_string(index));
      op.inputs.push_back(t.get<std::size_t>());
    }
  }
  if (op.kind == BlockOpKind::Conv2d) REMAT_RETURN_IF_ERROR(readConv2dFields(r, op.layer));
  return r.rejectUnknown(std::string(blockOpKindName(op.kind)) + " inner ops");
}

Status readBlockFields(FieldReader& r, const json& object, LayerSpec& layer) {
  r.markUsed("ops");
  if (!object.contains("ops")) return r.error("ops", "is missing");
  const json& ops = object.at("ops");
  if (!ops.is_array()) return r.error("ops", "must be an array, not " + FieldReader::describe(ops));
  if (ops.empty()) return r.error("ops", "is empty: a block needs at least one inner op");
  layer.ops.resize(ops.size());
  for (std::size_t i = 0; i < ops.size(); ++i) REMAT_RETURN_IF_ERROR(readBlockOp(ops[i], i, r.where(), layer.ops[i]));
  return Status::ok();
}

// The kind's own fields, then (real kinds that run kernels) the measured numbers of `remat profile`.
Status readKindFields(FieldReader& r, const json& object, LayerSpec& layer) {
  switch (layer.kind) {
    case LayerKind::Abstract: return readAbstractFields(r, layer.numbers);  // its numbers are given, not measured
    case LayerKind::Conv2d: REMAT_RETURN_IF_ERROR(readConv2dFields(r, layer)); break;
    case LayerKind::MaxPool:
    case LayerKind::AvgPool: REMAT_RETURN_IF_ERROR(readPoolFields(r, layer)); break;
    case LayerKind::AdaptiveAvgPool: REMAT_RETURN_IF_ERROR(readAdaptiveAvgPoolFields(r, layer)); break;
    case LayerKind::Linear: REMAT_RETURN_IF_ERROR(readLinearFields(r, layer)); break;
    case LayerKind::Dropout: REMAT_RETURN_IF_ERROR(readDropoutFields(r, layer)); break;
    case LayerKind::BasicBlock: REMAT_RETURN_IF_ERROR(readBasicBlockFields(r, layer)); break;
    case LayerKind::Bottleneck: REMAT_RETURN_IF_ERROR(readBottleneckFields(r, layer)); break;
    case LayerKind::InvertedResidual: REMAT_RETURN_IF_ERROR(readInvertedResidualFields(r, layer)); break;
    case LayerKind::Block: REMAT_RETURN_IF_ERROR(readBlockFields(r, object, layer)); break;
    case LayerKind::Relu:
    case LayerKind::Relu6:
    case LayerKind::BatchNorm: break;
    case LayerKind::Flatten: return Status::ok();  // a view: no kernel to measure
  }
  return readMeasured(r, layer);
}

Status readLayer(const json& object, std::size_t index, const std::string& source, LayerSpec& layer) {
  std::string where = source + ": layer " + std::to_string(index);
  if (!object.is_object()) return Status::invalid(where + ": must be an object, not " + FieldReader::describe(object));
  if (object.contains("name") && object.at("name").is_string())
    where += " ('" + object.at("name").get<std::string>() + "')";
  FieldReader r(object, where);
  layer.name = "layer" + std::to_string(index);
  REMAT_RETURN_IF_ERROR(r.readString("name", layer.name, false));
  std::string kind;
  REMAT_RETURN_IF_ERROR(r.readString("kind", kind, true));
  auto parsedKind = parseKind(kind);
  if (!parsedKind) return r.error("kind", "is '" + kind + "': " + parsedKind.status().message());
  layer.kind = *parsedKind;
  REMAT_RETURN_IF_ERROR(readKindFields(r, object, layer));
  return r.rejectUnknown(std::string(kindName(layer.kind)) + " layers");
}

Status readInput(const json& object, const std::string& source, InputSpec& input) {
  const std::string where = source + ": input";
  if (!object.is_object()) return Status::invalid(where + ": must be an object, not " + FieldReader::describe(object));
  FieldReader r(object, where);
  std::string dtype = "float32";
  REMAT_RETURN_IF_ERROR(r.readString("dtype", dtype, false));
  auto parsed = parseDType(dtype);
  if (!parsed) return r.error("dtype", parsed.status().message());
  input.dtype = *parsed;
  bool hasBytes = false;
  REMAT_RETURN_IF_ERROR(r.readBytes("bytes", input.bytes, false, &hasBytes));
  r.markUsed("shape");
  if (object.contains("shape")) {
    const json& shape = object.at("shape");
    if (!shape.is_array() || shape.empty())
      return r.error("shape", "must be a non-empty array of positive integers, not " + FieldReader::describe(shape));
    std::uint64_t bytes = dtypeBytes(input.dtype);
    for (std::size_t i = 0; i < shape.size(); ++i) {
      const json& d = shape[i];
      if (!d.is_number_integer() || d.get<std::int64_t>() <= 0 ||
          (d.is_number_unsigned() && d.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)))
        return r.error("shape", "element " + std::to_string(i) + " must be a positive integer, not " + d.dump());
      input.shape.push_back(d.get<std::int64_t>());
      if (__builtin_mul_overflow(bytes, d.get<std::uint64_t>(), &bytes))
        return r.error("shape", "describes more than 2^64 bytes");
    }
    if (hasBytes && bytes != input.bytes)
      return r.error("bytes",
                     "is " + std::to_string(input.bytes) + " but the shape and dtype give " + std::to_string(bytes));
    input.bytes = bytes;
  } else if (!hasBytes) {
    return Status::invalid(where + ": needs 'shape' (real layers) or 'bytes' (abstract chains)");
  }
  return r.rejectUnknown("input");
}

// The fields of each kind, as readKindFields reads them (defaults written out, except groups = 1
// and ceil_mode = false, which most layers have).
void writeAbstractFields(const LayerNumbers& m, json& j) {
  j["out_bytes"] = m.outBytes;
  j["needs_input"] = m.needsInput;
  j["needs_output"] = m.needsOutput;
  j["extra_bytes"] = m.extraBytes;
  j["fwd_workspace_bytes"] = m.fwdWorkspaceBytes;
  j["bwd_workspace_bytes"] = m.bwdWorkspaceBytes;
  j["param_bytes"] = m.paramBytes;
  j["fwd_cost"] = m.fwdCost;
  j["bwd_cost"] = m.bwdCost;
}

void writeConv2dFields(const LayerSpec& layer, json& j) {
  j["out_channels"] = layer.outChannels;
  j["kernel"] = layer.kernel;
  j["stride"] = layer.stride;
  j["padding"] = layer.padding;
  if (layer.groups != 1) j["groups"] = layer.groups;
  j["bias"] = layer.bias;
}

void writePoolFields(const LayerSpec& layer, json& j) {
  j["kernel"] = layer.kernel;
  j["stride"] = layer.stride;
  j["padding"] = layer.padding;
  if (layer.ceilMode) j["ceil_mode"] = true;
}

void writeAdaptiveAvgPoolFields(const LayerSpec& layer, json& j) {
  j["output_height"] = layer.outputHeight;
  j["output_width"] = layer.outputWidth;
}

void writeLinearFields(const LayerSpec& layer, json& j) {
  j["out_features"] = layer.outFeatures;
  j["bias"] = layer.bias;
}

void writeBasicBlockFields(const LayerSpec& layer, json& j) {
  j["out_channels"] = layer.outChannels;
  j["stride"] = layer.stride;
}

void writeBottleneckFields(const LayerSpec& layer, json& j) {
  j["width"] = layer.width;
  j["out_channels"] = layer.outChannels;
  j["stride"] = layer.stride;
}

void writeInvertedResidualFields(const LayerSpec& layer, json& j) {
  j["out_channels"] = layer.outChannels;
  j["stride"] = layer.stride;
  j["expand_ratio"] = layer.expandRatio;
}

// Inner ops as readBlockOp reads them: inputs only where they are not the tensor just before.
void writeBlockOps(const LayerSpec& layer, json& j) {
  json ops = json::array();
  for (std::size_t i = 0; i < layer.ops.size(); ++i) {
    const BlockOpSpec& op = layer.ops[i];
    json o = json::object();
    o["name"] = op.layer.name;
    o["kind"] = std::string(blockOpKindName(op.kind));
    if (op.inputs != std::vector<std::size_t>{i}) o["inputs"] = op.inputs;
    if (op.kind == BlockOpKind::Conv2d) writeConv2dFields(op.layer, o);
    ops.push_back(std::move(o));
  }
  j["ops"] = std::move(ops);
}

// The measured numbers of `remat profile`, in pairs as readMeasured wants them.
void writeMeasured(const LayerSpec& layer, json& j) {
  if (layer.hasMeasuredWorkspace) {
    j["fwd_workspace_bytes"] = layer.numbers.fwdWorkspaceBytes;
    j["bwd_workspace_bytes"] = layer.numbers.bwdWorkspaceBytes;
  }
  if (layer.hasMeasuredCost) {
    j["fwd_cost"] = layer.numbers.fwdCost;
    j["bwd_cost"] = layer.numbers.bwdCost;
  }
}

json layerToJson(const LayerSpec& layer) {
  json j = json::object();
  j["name"] = layer.name;
  j["kind"] = std::string(kindName(layer.kind));
  switch (layer.kind) {
    case LayerKind::Abstract: writeAbstractFields(layer.numbers, j); return j;  // its numbers are all given
    case LayerKind::Conv2d: writeConv2dFields(layer, j); break;
    case LayerKind::MaxPool:
    case LayerKind::AvgPool: writePoolFields(layer, j); break;
    case LayerKind::AdaptiveAvgPool: writeAdaptiveAvgPoolFields(layer, j); break;
    case LayerKind::Linear: writeLinearFields(layer, j); break;
    case LayerKind::Dropout: j["p"] = layer.dropoutP; break;
    case LayerKind::BasicBlock: writeBasicBlockFields(layer, j); break;
    case LayerKind::Bottleneck: writeBottleneckFields(layer, j); break;
    case LayerKind::InvertedResidual: writeInvertedResidualFields(layer, j); break;
    case LayerKind::Block: writeBlockOps(layer, j); break;
    case LayerKind::Relu:
    case LayerKind::Relu6:
    case LayerKind::BatchNorm:
    case LayerKind::Flatten: break;
  }
  writeMeasured(layer, j);
  return j;
}

std::string fileStem(const std::string& source) { return std::filesystem::path(source).stem().string(); }

}  // namespace

Result<ChainSpec> chainSpecFromJson(const json& j, const std::string& source) {
  if (!j.is_object())
    return Status::invalid(source + ": the top level must be a JSON object, not " + FieldReader::describe(j));
  FieldReader r(j, source);
  std::string format;
  REMAT_RETURN_IF_ERROR(r.readString("format", format, true));
  if (format != kChainFormat)
    return r.error("format", "is '" + format + "', expected '" + std::string(kChainFormat) + "'");
  ChainSpec spec;
  spec.name = fileStem(source);
  REMAT_RETURN_IF_ERROR(r.readString("name", spec.name, false));
  r.markUsed("input");
  r.markUsed("layers");
  REMAT_RETURN_IF_ERROR(r.rejectUnknown("a chain file"));
  if (!j.contains("input")) return r.error("input", "is missing");
  REMAT_RETURN_IF_ERROR(readInput(j.at("input"), source, spec.input));
  if (!j.contains("layers")) return r.error("layers", "is missing");
  const json& layers = j.at("layers");
  if (!layers.is_array()) return r.error("layers", "must be an array, not " + FieldReader::describe(layers));
  if (layers.empty()) return r.error("layers", "is empty: a chain needs at least one layer");
  spec.layers.resize(layers.size());
  for (std::size_t i = 0; i < layers.size(); ++i)
    REMAT_RETURN_IF_ERROR(readLayer(layers[i], i, source, spec.layers[i]));
  return spec;
}

Result<ChainSpec> parseChainSpec(const std::string& text, const std::string& source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    return Status::invalid(source + ": not valid JSON (byte " + std::to_string(e.byte) + "): " + e.what());
  } catch (const std::exception& e) {
    return Status::invalid(source + ": not valid JSON: " + e.what());
  }
  return chainSpecFromJson(j, source);
}

Result<Chain> parseChain(const std::string& text, const std::string& source) {
  auto spec = parseChainSpec(text, source);
  if (!spec) return spec.status();
  auto chain = buildChain(*spec);
  if (!chain) return chain.status().withContext(source);
  return chain;
}

Result<Chain> loadChainFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::io(path + ": cannot open chain file for reading");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return Status::io(path + ": read error");
  return parseChain(buffer.str(), path);
}

json chainSpecToJson(const ChainSpec& spec) {
  json j = json::object();
  j["format"] = kChainFormat;
  j["name"] = spec.name;
  json input = json::object();
  if (!spec.input.shape.empty()) {
    input["shape"] = spec.input.shape;
  } else {
    input["bytes"] = spec.input.bytes;
  }
  input["dtype"] = std::string(dtypeName(spec.input.dtype));
  j["input"] = input;
  json layers = json::array();
  for (const LayerSpec& layer : spec.layers) layers.push_back(layerToJson(layer));
  j["layers"] = std::move(layers);
  return j;
}

std::string chainSpecToText(const ChainSpec& spec) {
  // One layer per line: diff-friendly and still small for long chains.
  const json j = chainSpecToJson(spec);
  std::string out = "{\n  \"format\": " + j["format"].dump() + ",\n  \"name\": " + j["name"].dump() +
                    ",\n  \"input\": " + j["input"].dump() + ",\n  \"layers\": [\n";
  const json& layers = j["layers"];
  for (std::size_t i = 0; i < layers.size(); ++i)
    out += "    " + layers[i].dump() + (i + 1 < layers.size() ? ",\n" : "\n");
  out += "  ]\n}\n";
  return out;
}

Status writeFileAtomically(const std::string& path, const std::string& text) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path folder = target.has_parent_path() ? target.parent_path() : fs::path(".");
  const std::string temp =
      (folder / ("." + target.filename().string() + ".tmp-" + std::to_string(::getpid()))).string();
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) return Status::io(path + ": cannot create temporary file '" + temp + "' for writing");
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.flush();
    if (!out) {
      out.close();
      std::error_code ignored;
      fs::remove(temp, ignored);
      return Status::io(path + ": write failed (disk full?)");
    }
  }
  std::error_code ec;
  fs::rename(temp, target, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(temp, ignored);
    return Status::io(path + ": cannot rename temporary file into place: " + ec.message());
  }
  return Status::ok();
}

Status saveChainFile(const ChainSpec& spec, const std::string& path) {
  return writeFileAtomically(path, chainSpecToText(spec));
}

}  // namespace remat
