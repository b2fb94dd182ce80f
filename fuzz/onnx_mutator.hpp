#pragma once
// The ONNX target's structure-aware mutator (issue 26): byte flips rarely make a protobuf that
// parses and means something wrong, so each mutation parses the ModelProto, changes one thing
// through protobuf's reflection and serialises it again. The thing is any field of any message in
// the model (graph, node, attribute, tensor, value info, dimension): a number set to an awkward
// value, a string set to another name of the model (a collision), to "" or to control characters,
// raw data cut or grown, an element of a repeated field removed, duplicated, swapped or added, a
// message cleared or replaced by a copy of another of its type. Unparsable data (and one mutation
// in eight) goes to libFuzzer's own byte mutator.
#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/reflection.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace remat::fuzz {

namespace pb = google::protobuf;

class OnnxMutator {
 public:
  explicit OnnxMutator(unsigned seed) : rng_(seed) {}

  void mutate(onnx::ModelProto& model) {
    collect(&model, 0);
    if (messages_.empty()) return;
    pb::Message* target = messages_[pick(messages_.size())];
    const pb::Descriptor* type = target->GetDescriptor();
    if (type->field_count() == 0) return;
    const pb::FieldDescriptor* field =
        type->field(static_cast<int>(pick(static_cast<std::size_t>(type->field_count()))));
    if (field->is_repeated())
      mutateRepeated(*target, field);
    else
      mutateSingular(*target, field);
  }

 private:
  std::size_t pick(std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(rng_() % n); }
  bool chance(unsigned oneIn) { return rng_() % oneIn == 0; }

  // Every message of the model (breadth enough: the first 20,000) and every string as a name pool.
  void collect(pb::Message* message, int depth) {
    if (messages_.size() >= 20000 || depth > 12) return;
    messages_.push_back(message);
    const pb::Reflection* r = message->GetReflection();
    std::vector<const pb::FieldDescriptor*> fields;
    r->ListFields(*message, &fields);
    for (const pb::FieldDescriptor* f : fields) {
      if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_STRING && f->type() == pb::FieldDescriptor::TYPE_STRING) {
        if (f->is_repeated()) {
          for (int i = 0; i < r->FieldSize(*message, f) && names_.size() < 5000; ++i)
            names_.push_back(r->GetRepeatedString(*message, f, i));
        } else if (names_.size() < 5000) {
          names_.push_back(r->GetString(*message, f));
        }
      }
      if (f->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE) continue;
      if (f->is_repeated()) {
        for (int i = 0; i < r->FieldSize(*message, f); ++i)
          collect(r->MutableRepeatedMessage(message, f, i), depth + 1);
      } else {
        collect(r->MutableMessage(message, f), depth + 1);
      }
    }
  }

  std::int64_t awkwardInt() {
    static const std::int64_t values[] = {
        0,    1,   -1,      2,         3,         4,         5,         -2, 7,       16,
        1000, 999, 1 << 20, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, -3, 1 << 30, 0x7fffffffffffLL};
    if (chance(3)) return static_cast<std::int64_t>(rng_() % 64) - 8;
    return values[pick(std::size(values))];
  }

  double awkwardFloat() {
    static const double values[] = {0.0, 1.0, -1.0, 6.0, 0.5, 1e30, -1e30, 1e-40};
    if (chance(4)) return std::numeric_limits<double>::quiet_NaN();
    if (chance(4)) return chance(2) ? HUGE_VAL : -HUGE_VAL;
    return values[pick(std::size(values))];
  }

  std::string awkwardString(const std::string& old) {
    switch (pick(8)) {
      case 0: return "";
      case 1: return "\x1b]0;title\x07\x1b[2J";
      case 2: return std::string(1000 + pick(3000), 'n');
      case 3: return old + old;
      case 4: return old.substr(0, pick(old.size() + 1));
      case 5: {  // a byte changed: raw data of another size or value
        std::string s = old.empty() ? std::string(1, '\0') : old;
        s[pick(s.size())] = static_cast<char>(rng_());
        return s;
      }
      default: return names_.empty() ? old : names_[pick(names_.size())];  // a collision
    }
  }

  void mutateSingular(pb::Message& m, const pb::FieldDescriptor* f) {
    const pb::Reflection* r = m.GetReflection();
    if (chance(6)) {
      r->ClearField(&m, f);
      return;
    }
    switch (f->cpp_type()) {
      case pb::FieldDescriptor::CPPTYPE_INT32: r->SetInt32(&m, f, static_cast<std::int32_t>(awkwardInt())); break;
      case pb::FieldDescriptor::CPPTYPE_INT64: r->SetInt64(&m, f, awkwardInt()); break;
      case pb::FieldDescriptor::CPPTYPE_UINT32: r->SetUInt32(&m, f, static_cast<std::uint32_t>(awkwardInt())); break;
      case pb::FieldDescriptor::CPPTYPE_UINT64: r->SetUInt64(&m, f, static_cast<std::uint64_t>(awkwardInt())); break;
      case pb::FieldDescriptor::CPPTYPE_FLOAT: r->SetFloat(&m, f, static_cast<float>(awkwardFloat())); break;
      case pb::FieldDescriptor::CPPTYPE_DOUBLE: r->SetDouble(&m, f, awkwardFloat()); break;
      case pb::FieldDescriptor::CPPTYPE_BOOL: r->SetBool(&m, f, !r->GetBool(m, f)); break;
      case pb::FieldDescriptor::CPPTYPE_ENUM: {
        const pb::EnumDescriptor* e = f->enum_type();
        r->SetEnum(&m, f, e->value(static_cast<int>(pick(static_cast<std::size_t>(e->value_count())))));
        break;
      }
      case pb::FieldDescriptor::CPPTYPE_STRING: r->SetString(&m, f, awkwardString(r->GetString(m, f))); break;
      case pb::FieldDescriptor::CPPTYPE_MESSAGE: {
        // Replaced by a copy of another message of its type (a node's attribute tensor by a
        // weight, a graph by a subgraph). The copy is taken first: the source may be inside the
        // field, and setting one member of a oneof destroys the member that was set.
        std::vector<const pb::Message*> same;
        for (const pb::Message* other : messages_)
          if (other->GetDescriptor() == f->message_type()) same.push_back(other);
        if (same.empty()) break;
        const pb::Message* source = same[pick(same.size())];
        std::unique_ptr<pb::Message> copy(source->New());
        copy->CopyFrom(*source);
        r->MutableMessage(&m, f)->CopyFrom(*copy);
        break;
      }
    }
  }

  void mutateRepeated(pb::Message& m, const pb::FieldDescriptor* f) {
    const pb::Reflection* r = m.GetReflection();
    const int size = r->FieldSize(m, f);
    const std::size_t what = pick(size == 0 ? 1 : 5);
    if (what == 0 || size == 0) {  // add one
      addElement(m, f, size);
      return;
    }
    const int i = static_cast<int>(pick(static_cast<std::size_t>(size)));
    if (what == 1) {  // remove one: swap it to the end
      r->SwapElements(&m, f, i, size - 1);
      r->RemoveLast(&m, f);
    } else if (what == 2) {
      r->SwapElements(&m, f, i, static_cast<int>(pick(static_cast<std::size_t>(size))));
    } else if (what == 3) {  // duplicate one (a node listed twice, an input twice)
      addElement(m, f, size);
      copyElement(m, f, i, size);
    } else {
      setElement(m, f, i);
    }
  }

  void addElement(pb::Message& m, const pb::FieldDescriptor* f, int size) {
    const pb::Reflection* r = m.GetReflection();
    switch (f->cpp_type()) {
      case pb::FieldDescriptor::CPPTYPE_INT32: r->AddInt32(&m, f, 0); break;
      case pb::FieldDescriptor::CPPTYPE_INT64: r->AddInt64(&m, f, 0); break;
      case pb::FieldDescriptor::CPPTYPE_UINT32: r->AddUInt32(&m, f, 0); break;
      case pb::FieldDescriptor::CPPTYPE_UINT64: r->AddUInt64(&m, f, 0); break;
      case pb::FieldDescriptor::CPPTYPE_FLOAT: r->AddFloat(&m, f, 0); break;
      case pb::FieldDescriptor::CPPTYPE_DOUBLE: r->AddDouble(&m, f, 0); break;
      case pb::FieldDescriptor::CPPTYPE_BOOL: r->AddBool(&m, f, false); break;
      case pb::FieldDescriptor::CPPTYPE_ENUM: r->AddEnum(&m, f, f->enum_type()->value(0)); break;
      case pb::FieldDescriptor::CPPTYPE_STRING: r->AddString(&m, f, ""); break;
      case pb::FieldDescriptor::CPPTYPE_MESSAGE: r->AddMessage(&m, f); break;
    }
    if (f->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE || size == 0)
      setElement(m, f, size);
    else
      copyElement(m, f, static_cast<int>(pick(static_cast<std::size_t>(size))), size);
  }

  void copyElement(pb::Message& m, const pb::FieldDescriptor* f, int from, int to) {
    const pb::Reflection* r = m.GetReflection();
    switch (f->cpp_type()) {
      case pb::FieldDescriptor::CPPTYPE_INT32: r->SetRepeatedInt32(&m, f, to, r->GetRepeatedInt32(m, f, from)); break;
      case pb::FieldDescriptor::CPPTYPE_INT64: r->SetRepeatedInt64(&m, f, to, r->GetRepeatedInt64(m, f, from)); break;
      case pb::FieldDescriptor::CPPTYPE_UINT32:
        r->SetRepeatedUInt32(&m, f, to, r->GetRepeatedUInt32(m, f, from));
        break;
      case pb::FieldDescriptor::CPPTYPE_UINT64:
        r->SetRepeatedUInt64(&m, f, to, r->GetRepeatedUInt64(m, f, from));
        break;
      case pb::FieldDescriptor::CPPTYPE_FLOAT: r->SetRepeatedFloat(&m, f, to, r->GetRepeatedFloat(m, f, from)); break;
      case pb::FieldDescriptor::CPPTYPE_DOUBLE:
        r->SetRepeatedDouble(&m, f, to, r->GetRepeatedDouble(m, f, from));
        break;
      case pb::FieldDescriptor::CPPTYPE_BOOL: r->SetRepeatedBool(&m, f, to, r->GetRepeatedBool(m, f, from)); break;
      case pb::FieldDescriptor::CPPTYPE_ENUM: r->SetRepeatedEnum(&m, f, to, r->GetRepeatedEnum(m, f, from)); break;
      case pb::FieldDescriptor::CPPTYPE_STRING:
        r->SetRepeatedString(&m, f, to, r->GetRepeatedString(m, f, from));
        break;
      case pb::FieldDescriptor::CPPTYPE_MESSAGE:
        if (from != to) r->MutableRepeatedMessage(&m, f, to)->CopyFrom(r->GetRepeatedMessage(m, f, from));
        break;
    }
  }

  void setElement(pb::Message& m, const pb::FieldDescriptor* f, int i) {
    const pb::Reflection* r = m.GetReflection();
    switch (f->cpp_type()) {
      case pb::FieldDescriptor::CPPTYPE_INT32:
        r->SetRepeatedInt32(&m, f, i, static_cast<std::int32_t>(awkwardInt()));
        break;
      case pb::FieldDescriptor::CPPTYPE_INT64: r->SetRepeatedInt64(&m, f, i, awkwardInt()); break;
      case pb::FieldDescriptor::CPPTYPE_UINT32:
        r->SetRepeatedUInt32(&m, f, i, static_cast<std::uint32_t>(awkwardInt()));
        break;
      case pb::FieldDescriptor::CPPTYPE_UINT64:
        r->SetRepeatedUInt64(&m, f, i, static_cast<std::uint64_t>(awkwardInt()));
        break;
      case pb::FieldDescriptor::CPPTYPE_FLOAT: r->SetRepeatedFloat(&m, f, i, static_cast<float>(awkwardFloat())); break;
      case pb::FieldDescriptor::CPPTYPE_DOUBLE: r->SetRepeatedDouble(&m, f, i, awkwardFloat()); break;
      case pb::FieldDescriptor::CPPTYPE_BOOL: r->SetRepeatedBool(&m, f, i, chance(2)); break;
      case pb::FieldDescriptor::CPPTYPE_ENUM: {
        const pb::EnumDescriptor* e = f->enum_type();
        r->SetRepeatedEnum(&m, f, i, e->value(static_cast<int>(pick(static_cast<std::size_t>(e->value_count())))));
        break;
      }
      case pb::FieldDescriptor::CPPTYPE_STRING:
        r->SetRepeatedString(&m, f, i, awkwardString(r->GetRepeatedString(m, f, i)));
        break;
      case pb::FieldDescriptor::CPPTYPE_MESSAGE: r->MutableRepeatedMessage(&m, f, i)->Clear(); break;
    }
  }

  std::mt19937_64 rng_;
  std::vector<pb::Message*> messages_;
  std::vector<std::string> names_;
};

}  // namespace remat::fuzz
