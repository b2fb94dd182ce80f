#include "remat/input/chain_file.hpp"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "remat/base/text.hpp"
#include "remat/input/atomic_file.hpp"
#include "remat/input/input_file.hpp"
#include "remat/input/json_document.hpp"
#include "remat/input/json_fields.hpp"
#include "remat/model/block.hpp"
#include "remat/model/operators.hpp"

namespace remat {
namespace {

using io::FieldReader;
using nlohmann::json;

// The format nests six containers deep (the top level, the layers array, a layer, a block's ops,
// an inner op, its inputs); a few levels more still get a message about the field rather than the
// nesting.
constexpr std::size_t kChainJsonDepth = 8;

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

// A kind's fields as its description lists them (operators.cpp): name, type, bounds, default.
Status readDescribedFields(FieldReader& r, std::span<const FieldInfo> fields, std::string_view kind, LayerSpec& layer) {
  for (const FieldInfo& f : fields) {
    const char* name = f.name.data();
    if (f.integer != nullptr) {
      if (f.defaultFrom != nullptr) layer.*f.integer = layer.*f.defaultFrom;
      REMAT_RETURN_IF_ERROR(r.readInt(name, layer.*f.integer, f.required, f.minimum, kMaxIntegerField));
    } else if (f.flag != nullptr) {
      REMAT_RETURN_IF_ERROR(r.readBool(name, layer.*f.flag, f.required));
    } else if (f.real != nullptr) {
      REMAT_RETURN_IF_ERROR(r.readDouble(name, layer.*f.real, 0.0, f.realMaximum, f.required));
      if (!f.atMaximum.empty() && layer.*f.real >= f.realMaximum) return r.error(name, std::string(f.atMaximum));
    } else {
      return Status::internal("the field '" + std::string(f.name) + "' of " + std::string(kind) + " has no reader");
    }
  }
  return Status::ok();
}

// One inner op of a block: name, kind, inputs (default: the tensor written just before it), and the
// fields its description lists (a conv2d's, a slice's, a channel shuffle's).
Status readBlockOp(const JsonDocument& doc, const json& object, std::size_t index, const std::string& where,
                   BlockOpSpec& op) {
  std::string what = where + ", inner op " + std::to_string(index);
  if (!object.is_object())
    return Status::invalid(doc.where(object) + ": " + what + ": must be an object, not " + doc.describe(object));
  if (const auto name = object.find("name"); name != object.end() && name->is_string())
    what += " (" + quoteText(name->get_ref<const std::string&>(), 40) + ")";
  FieldReader r(doc, object, what);
  op.layer.name = "op" + std::to_string(index);
  REMAT_RETURN_IF_ERROR(r.readName("name", op.layer.name, false));
  std::string kind;
  REMAT_RETURN_IF_ERROR(r.readString("kind", kind, true));
  auto parsed = parseBlockOpKind(kind);
  if (!parsed) return r.error("kind", parsed.status().message());
  op.kind = *parsed;
  op.inputs = {index};
  if (const json* inputs = r.member("inputs")) {
    if (!inputs->is_array() || inputs->empty())
      return r.error("inputs", "must be a non-empty array of tensor numbers, not " + doc.describe(*inputs));
    op.inputs.clear();
    for (const json& t : *inputs) {
      const bool negative = t.is_number_integer() && !t.is_number_unsigned() && t.get<std::int64_t>() < 0;
      if (!t.is_number_integer() || negative || t.get<std::uint64_t>() > index)
        return r.error("inputs", "lists " + doc.describe(t) + ": op " + std::to_string(index) +
                                     " may read tensor 0 (the block's input) up to " + std::to_string(index));
      op.inputs.push_back(t.get<std::size_t>());
    }
  }
  const BlockOpInfo& info = blockOpInfo(op.kind);
  REMAT_RETURN_IF_ERROR(readDescribedFields(r, info.fields, info.name, op.layer));
  return r.rejectUnknown(std::string(blockOpKindName(op.kind)) + " inner ops");
}

Status readBlockFields(FieldReader& r, const std::string& what, LayerSpec& layer) {
  const JsonDocument& doc = r.document();
  const json* ops = r.member("ops");
  if (ops == nullptr) return r.error("ops", "is missing");
  if (!ops->is_array()) return r.error("ops", "must be an array, not " + doc.describe(*ops));
  if (ops->empty()) return r.error("ops", "is empty: a block needs at least one inner op");
  layer.ops.resize(ops->size());
  for (std::size_t i = 0; i < ops->size(); ++i)
    REMAT_RETURN_IF_ERROR(readBlockOp(doc, (*ops)[i], i, what, layer.ops[i]));
  return Status::ok();
}

// The kind's own fields, then (real kinds that run kernels) the measured numbers of `remat profile`.
Status readKindFields(FieldReader& r, const std::string& what, LayerSpec& layer) {
  switch (layer.kind) {
    case LayerKind::Abstract: return readAbstractFields(r, layer.numbers);  // its numbers are given, not measured
    case LayerKind::Flatten: return Status::ok();                           // a view: no kernel to measure
    case LayerKind::Block: REMAT_RETURN_IF_ERROR(readBlockFields(r, what, layer)); break;
    default: {
      const OperatorInfo& info = operatorInfo(layer.kind);
      REMAT_RETURN_IF_ERROR(readDescribedFields(r, info.fields, info.name, layer));
      break;
    }
  }
  return readMeasured(r, layer);
}

Status readLayer(const JsonDocument& doc, const json& object, std::size_t index, LayerSpec& layer) {
  std::string what = "layer " + std::to_string(index + 1);
  if (!object.is_object())
    return Status::invalid(doc.where(object) + ": " + what + ": must be an object, not " + doc.describe(object));
  if (const auto name = object.find("name"); name != object.end() && name->is_string())
    what += " (" + quoteText(name->get_ref<const std::string&>(), 40) + ")";
  FieldReader r(doc, object, what);
  layer.name = "layer" + std::to_string(index);
  REMAT_RETURN_IF_ERROR(r.readName("name", layer.name, false));
  std::string kind;
  REMAT_RETURN_IF_ERROR(r.readString("kind", kind, true));
  auto parsedKind = parseKind(kind);
  if (!parsedKind) return r.error("kind", parsedKind.status().message());
  layer.kind = *parsedKind;
  REMAT_RETURN_IF_ERROR(readKindFields(r, what, layer));
  return r.rejectUnknown(std::string(kindName(layer.kind)) + " layers");
}

// input.shape: positive dimensions, each at most kMaxIntegerField, whose bytes fit in 64 bits.
Status readShape(FieldReader& r, InputSpec& input) {
  const json* shape = r.member("shape");
  if (!shape) return Status::ok();
  const JsonDocument& doc = r.document();
  if (!shape->is_array() || shape->empty())
    return r.error("shape", "must be a non-empty array of positive integers, not " + doc.describe(*shape));
  std::uint64_t bytes = dtypeBytes(input.dtype);
  for (std::size_t i = 0; i < shape->size(); ++i) {
    const json& d = (*shape)[i];
    const bool isInteger =
        d.is_number_integer() && !(d.is_number_unsigned() && d.get<std::uint64_t>() > std::uint64_t{INT64_MAX});
    const std::int64_t dimension = isInteger ? d.get<std::int64_t>() : 0;
    if (dimension < 1 || dimension > kMaxIntegerField)
      return r.error("shape", "element " + std::to_string(i + 1) + " must be a positive integer of at most " +
                                  std::to_string(kMaxIntegerField) + ", not " + doc.describe(d));
    input.shape.push_back(dimension);
    if (__builtin_mul_overflow(bytes, static_cast<std::uint64_t>(dimension), &bytes))
      return r.error("shape", "describes more than 2^64 bytes");
  }
  input.bytes = bytes;
  return Status::ok();
}

Status readInput(const JsonDocument& doc, const json& object, InputSpec& input) {
  if (!object.is_object())
    return Status::invalid(doc.where(object) + ": input: must be an object, not " + doc.describe(object));
  FieldReader r(doc, object, "input");
  std::string dtype = "float32";
  REMAT_RETURN_IF_ERROR(r.readString("dtype", dtype, false));
  auto parsed = parseDType(dtype);
  if (!parsed) return r.error("dtype", parsed.status().message());
  input.dtype = *parsed;
  bool hasBytes = false;
  std::uint64_t statedBytes = 0;
  REMAT_RETURN_IF_ERROR(r.readBytes("bytes", statedBytes, false, &hasBytes));
  REMAT_RETURN_IF_ERROR(readShape(r, input));
  if (input.shape.empty()) {
    if (!hasBytes)
      return Status::invalid(doc.where(object) + ": input: needs 'shape' (real layers) or 'bytes' (abstract chains)");
    input.bytes = statedBytes;
  } else if (hasBytes && statedBytes != input.bytes) {
    return r.error(
        "bytes", "is " + std::to_string(statedBytes) + " but the shape and dtype give " + std::to_string(input.bytes));
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

// A kind's fields as its description lists them; a field marked so only when it is not LayerSpec's
// default (a conv's groups 1, a pool's ceil_mode false).
void writeDescribedFields(std::span<const FieldInfo> fields, const LayerSpec& layer, json& j) {
  static const LayerSpec defaults;
  for (const FieldInfo& f : fields) {
    const std::string name(f.name);
    if (f.integer != nullptr && !(f.omitDefault && layer.*f.integer == defaults.*f.integer)) j[name] = layer.*f.integer;
    if (f.flag != nullptr && !(f.omitDefault && layer.*f.flag == defaults.*f.flag)) j[name] = layer.*f.flag;
    if (f.real != nullptr) j[name] = layer.*f.real;
  }
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

// Inner ops as readBlockOp reads them: inputs only where they are not the tensor just before.
void writeBlockOps(const LayerSpec& layer, json& j) {
  json ops = json::array();
  for (std::size_t i = 0; i < layer.ops.size(); ++i) {
    const BlockOpSpec& op = layer.ops[i];
    json o = json::object();
    o["name"] = op.layer.name;
    o["kind"] = std::string(blockOpKindName(op.kind));
    if (op.inputs != std::vector<std::size_t>{i}) o["inputs"] = op.inputs;
    writeDescribedFields(blockOpInfo(op.kind).fields, op.layer, o);
    ops.push_back(std::move(o));
  }
  j["ops"] = std::move(ops);
}

json layerToJson(const LayerSpec& layer) {
  json j = json::object();
  j["name"] = layer.name;
  j["kind"] = std::string(kindName(layer.kind));
  switch (layer.kind) {
    case LayerKind::Abstract: writeAbstractFields(layer.numbers, j); return j;  // its numbers are all given
    case LayerKind::Flatten: return j;
    case LayerKind::Block: writeBlockOps(layer, j); break;
    default: writeDescribedFields(operatorInfo(layer.kind).fields, layer, j); break;
  }
  writeMeasured(layer, j);
  return j;
}

std::string fileStem(const std::string& source) { return std::filesystem::path(source).stem().string(); }

Result<ChainSpec> chainSpecFromDocument(const JsonDocument& doc) {
  const json& j = doc.root();
  if (!j.is_object())
    return Status::invalid(doc.where(j) + ": the top level must be a JSON object, not " + doc.describe(j));
  FieldReader r(doc, j, "");
  std::string format;
  REMAT_RETURN_IF_ERROR(r.readString("format", format, true));
  if (format != kChainFormat)
    return r.error("format", "is " + quoteText(format, 40) + ", expected '" + std::string(kChainFormat) + "'");
  ChainSpec spec;
  spec.name = fileStem(doc.source());
  REMAT_RETURN_IF_ERROR(r.readName("name", spec.name, false));
  const json* input = r.member("input");
  const json* layers = r.member("layers");
  REMAT_RETURN_IF_ERROR(r.rejectUnknown("a chain file"));
  if (!input) return r.error("input", "is missing");
  REMAT_RETURN_IF_ERROR(readInput(doc, *input, spec.input));
  if (!layers) return r.error("layers", "is missing");
  if (!layers->is_array()) return r.error("layers", "must be an array, not " + doc.describe(*layers));
  if (layers->empty()) return r.error("layers", "is empty: a chain needs at least one layer");
  spec.layers.resize(layers->size());
  for (std::size_t i = 0; i < layers->size(); ++i)
    REMAT_RETURN_IF_ERROR(readLayer(doc, (*layers)[i], i, spec.layers[i]));
  return spec;
}

// Shape inference, each error placed at the layer (or the input) it is about.
Result<Chain> buildPlacedChain(const JsonDocument& doc, const ChainSpec& spec) {
  const json& root = doc.root();
  ChainBuilder builder(spec);
  // Places are found only for an error: finding one scans the text up to it.
  if (const Status started = builder.start(); !started)
    return started.withContext(doc.where(root.at("input")) + ": input");
  const json& layers = root.at("layers");
  for (std::size_t i = 0; i < spec.layers.size(); ++i) {
    const Status added = builder.addLayer(i);
    if (!added) {
      // The name a file gave; a default one ("layer0") would only confuse the 1-based number.
      const bool named = layers[i].contains("name");
      return added.withContext(
          doc.where(layers[i]) + ": " +
          (named ? layerLabel(spec.layers[i], i)
                 : "layer " + std::to_string(i + 1) + " (" + std::string(kindName(spec.layers[i].kind)) + ")"));
    }
  }
  auto chain = builder.finish();
  if (!chain) return Status::invalid(doc.where(layers) + ": the chain " + chain.status().message());
  return chain;
}

Result<JsonDocument> parseChainDocument(const std::string& text, const std::string& source) {
  return JsonDocument::parse(text, source, kChainJsonDepth);
}

}  // namespace

Result<ChainSpec> chainSpecFromJson(const json& j, const std::string& source) {
  return chainSpecFromDocument(JsonDocument::unplaced(j, source));
}

Result<ChainSpec> parseChainSpec(const std::string& text, const std::string& source) {
  auto doc = parseChainDocument(text, source);
  if (!doc) return doc.status();
  return chainSpecFromDocument(*doc);
}

Result<Chain> parseChain(const std::string& text, const std::string& source) {
  auto doc = parseChainDocument(text, source);
  if (!doc) return doc.status();
  auto spec = chainSpecFromDocument(*doc);
  if (!spec) return spec.status();
  return buildPlacedChain(*doc, *spec);
}

Result<Chain> loadChainFile(const std::string& path) {
  auto text = readInputFile(path, kMaxChainFileBytes, "chain file");
  if (!text) return text.status();
  return parseChain(*text, path);
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

Status saveChainFile(const ChainSpec& spec, const std::string& path, const WriteOptions& options) {
  return writeFileAtomically(path, chainSpecToText(spec), options);
}

}  // namespace remat
